// The official Seed client against a live `serve --http`, for tests/server/test_seed_api_client.py (issue 19 point 5):
// it reads the harness's document, comments and profile through createSeedClient (every answer parsed by the
// client's own zod output schemas), publishes a document and a comment it signs with its own key through its own
// builders and PublishBlobs, and sends a tampered blob, a blob under the wrong CID and a Ref into a space it may not
// write, which must all be refused.
//
// stdin: {"base", "token", "doc": "hm://<uid>/<path>", "seed": hex, "markdown"}
// stdout: {"reads": {...}, "published": {...}, "refused": {...}}; a failing step answers {"error": message} in place.
import * as blobs from '@seed-hypermedia/client/blobs'
import { decode } from '@seed-hypermedia/client/cbor'
import * as changes from '@seed-hypermedia/client/change'
import { createSeedClient } from '@seed-hypermedia/client/client'
import * as comments from '@seed-hypermedia/client/comment'
import { unpackHmId } from '@seed-hypermedia/client/hm-types'
import { flattenToOperations, parseMarkdown } from '@seed-hypermedia/client/markdown-to-blocks'
import * as refs from '@seed-hypermedia/client/ref'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))
await blobs.nativeCryptoReady

const client = createSeedClient(input.base, { headers: { Authorization: `Bearer ${input.token}` } })
const docId = unpackHmId(input.doc)
const uid = docId.uid

async function step (fn) {
  try {
    return await fn()
  } catch (err) {
    return { error: String(err && err.message ? err.message : err), status: err && err.status }
  }
}

const paragraph = (id, text) => ({ block: { id, type: 'Paragraph', text, annotations: [], attributes: {} }, children: [] })

const reads = {}
reads.resource = await step(async () => {
  const got = await client.request('Resource', docId)
  const doc = got.document
  const types = new Set()
  const walk = (nodes) => nodes.forEach((n) => { types.add(n.block.type); walk(n.children || []) })
  walk(doc.content)
  return {
    type: got.type,
    name: doc.metadata.name,
    texts: doc.content.map((n) => n.block.text),
    types: [...types].sort(),
    version: doc.version
  }
})
reads.comments = await step(async () => {
  const got = await client.request('ListComments', { targetId: docId })
  return { texts: got.comments.map((c) => c.content[0].block.text), authors: Object.keys(got.authors) }
})
reads.account = await step(async () => {
  const got = await client.request('Account', uid)
  return { type: got.type, name: got.metadata && got.metadata.name }
})
reads.metadata = await step(async () => (await client.request('ResourceMetadata', docId)).metadata)
reads.changes = await step(async () => {
  const got = await client.request('ListChanges', { targetId: docId })
  return { count: got.changes.length, latestVersion: got.latestVersion }
})
reads.events = await step(async () => (await client.request('ListEvents', { pageSize: 5 })).events.map((e) => e.type))
reads.children = await step(async () => {
  const got = await client.request('Query', { includes: [{ space: uid, mode: 'Children' }] })
  return got.results.map((r) => ({ path: r.path, name: r.metadata.name, sortTime: r.sortTime instanceof Date }))
})
reads.blob = await step(async () => {
  const version = reads.resource.version.split('.')[0]
  return (await client.request('GetCID', { cid: version })).value.type
})

const key = blobs.nobleKeyPairFromSeed(new Uint8Array(Buffer.from(input.seed, 'hex')))
const account = blobs.principalToString(key.principal)
const published = { account }
published.document = await step(async () => {
  const genesis = await changes.createGenesisChange(key)
  const { tree, metadata } = parseMarkdown(input.markdown)
  const attrs = Object.entries(metadata).map(([k, value]) => ({ key: [k], value }))
  const ops = [{ type: 'SetAttributes', attrs }, ...flattenToOperations(tree)]
  const { unsignedBytes } = changes.createChangeOps({ ops, genesisCid: genesis.cid, deps: [genesis.cid], depth: 1 })
  const change = await changes.createChange(unsignedBytes, key)
  const ref = await refs.createVersionRef(
    { space: account, path: '/from-client', genesis: genesis.cid.toString(), version: change.cid.toString(), generation: 1 },
    key
  )
  const answer = await client.publish({
    blobs: [
      { data: genesis.bytes, cid: genesis.cid.toString() },
      { data: change.bytes, cid: change.cid.toString() },
      ...ref.blobs
    ]
  })
  published.change = { hex: Buffer.from(change.bytes).toString('hex'), genesis: genesis.cid.toString() }
  const back = await client.request('Resource', unpackHmId(`hm://${account}/from-client`))
  return { cids: answer.cids, version: change.cid.toString(), readBack: back.document.metadata.name }
})
published.comment = await step(async () => {
  const publishInput = await comments.createComment(
    { content: [paragraph('cc1', 'From the official client.')], docId, docVersion: reads.resource.version },
    key
  )
  const answer = await client.publish(publishInput)
  return { cids: answer.cids, id: await comments.commentRecordIdFromBlob(publishInput.blobs[0].data) }
})

const refused = {}
refused.tampered = await step(async () => {
  const publishInput = await comments.createComment(
    { content: [paragraph('cc2', 'Signed, then altered.')], docId, docVersion: reads.resource.version },
    key
  )
  const data = Buffer.from(publishInput.blobs[0].data)
  const at = data.indexOf('altered')
  data.write('ALTERED', at)
  refused.tamperedCid = blobs.encode(decode(new Uint8Array(data))).cid.toString()
  await client.publish({ blobs: [{ data: new Uint8Array(data) }] })
  return { accepted: true }
})
refused.wrongCid = await step(async () => {
  const data = new Uint8Array(Buffer.from(published.change.hex, 'hex'))
  await client.publish({ blobs: [{ data, cid: published.change.genesis }] })
  return { accepted: true }
})
refused.nonWriter = await step(async () => {
  // A Ref into the harness account's space, signed by a key it never gave a capability to.
  const genesis = await changes.createGenesisChange(key)
  const ref = await refs.createVersionRef(
    { space: uid, path: '/intrusion', genesis: genesis.cid.toString(), version: published.document.version, generation: 1 },
    key
  )
  const data = new Uint8Array(Buffer.from(published.change.hex, 'hex'))
  await client.publish({ blobs: [{ data, cid: published.document.version }, ...ref.blobs] })
  return { accepted: true }
})
process.stdout.write(JSON.stringify({ reads, published, refused }))
