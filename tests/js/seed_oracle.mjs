// The official Seed client (`@seed-hypermedia/client`) as the reference for tests/test_hm_blobs.py and
// tests/test_hm_ids.py: it builds, verifies and addresses blobs exactly as the agents service does.
//
// stdin: a JSON array of commands; stdout: a JSON array with one answer per command, in order. A command that throws
// answers {"error": message}, so one bad case never hides the others. CIDs travel as strings, bytes as hex. Commands:
//   {"op": "account", "seed": hex}                 -> {"account"}: principalToString of the seed's key
//   {"op": "verify", "hex", "cid"?}                -> {"ok", "cid", "type"}: decode, the client's verify(), and the
//                                                     sha2-256 CID the client computes; with "cid", decodeBlob must
//                                                     accept the bytes under it ({"cidAccepted"})
//   {"op": "make", "kind", "seed": hex, "ts", ...} -> {"hex", "cid", "ok"}: a blob built by the client's own
//                                                     builder, and whether the client's verify() accepts it
//   {"op": "recordId", "hex"}                      -> {"id"}: commentRecordIdFromBlob ("<authority>/<tsid>")
//   {"op": "unpack", "id"}                         -> {"result"}: unpackHmId (null when it refuses)
//   {"op": "pack", "hmId"}                         -> {"result"}: packHmId
//   {"op": "repack", "id"}                         -> {"result"}: packHmId(unpackHmId(id))
import * as blobs from '@seed-hypermedia/client/blobs'
import { decode } from '@seed-hypermedia/client/cbor'
import * as changes from '@seed-hypermedia/client/change'
import * as comments from '@seed-hypermedia/client/comment'
import { packHmId, unpackHmId } from '@seed-hypermedia/client/hm-types'
import * as refs from '@seed-hypermedia/client/ref'
import { CID } from 'multiformats/cid'

const hex = (bytes) => Buffer.from(bytes).toString('hex')
const fromHex = (text) => new Uint8Array(Buffer.from(text, 'hex'))
const keyOf = (seed) => blobs.nobleKeyPairFromSeed(fromHex(seed))

// Some builders (tombstone and redirect Refs, Comments) stamp Date.now() themselves; pinning the clock for the
// duration of one call is the only way to get bytes comparable with a Python blob at a fixed ts.
async function atTime (ts, build) {
  const realNow = Date.now
  Date.now = () => ts
  try {
    return await build()
  } finally {
    Date.now = realNow
  }
}

const publishedBytes = (publishInput) => publishInput.blobs[0].data

async function make (command) {
  const key = keyOf(command.seed)
  const ts = command.ts
  switch (command.kind) {
    case 'genesis': {
      const made = await changes.createGenesisChange(key)
      return { hex: hex(made.bytes), cid: made.cid.toString() }
    }
    case 'change': {
      const { unsignedBytes } = changes.createChangeOps({
        ops: command.ops,
        genesisCid: command.genesis ? CID.parse(command.genesis) : undefined,
        deps: command.deps ? command.deps.map((text) => CID.parse(text)) : undefined,
        depth: command.depth,
        ts: BigInt(ts)
      })
      const made = await changes.createChange(unsignedBytes, key)
      return { hex: hex(made.bytes), cid: made.cid.toString() }
    }
    case 'versionRef':
      return bytesAnswer(publishedBytes(await refs.createVersionRef({ ...command.input, ts }, key)))
    case 'tombstoneRef':
      return bytesAnswer(publishedBytes(await atTime(ts, () => refs.createTombstoneRef(command.input, key))))
    case 'redirectRef':
      return bytesAnswer(publishedBytes(await atTime(ts, () => refs.createRedirectRef(command.input, key))))
    case 'comment':
      return bytesAnswer(publishedBytes(await atTime(ts, () => comments.createComment(command.input, key))))
    case 'updateComment':
      return bytesAnswer(publishedBytes(await atTime(ts, () => comments.updateComment(command.input, key))))
    case 'deleteComment':
      return bytesAnswer(publishedBytes(await atTime(ts, () => comments.deleteComment(command.input, key))))
    case 'profile': {
      const made = await blobs.createProfile(key, command.input, ts)
      return { hex: hex(made.data), cid: made.cid.toString() }
    }
    case 'capability': {
      const input = command.input
      const delegate = blobs.principalFromString(input.delegate)
      const made = await blobs.createCapability(key, delegate, input.role, ts, input.opts ?? {})
      return { hex: hex(made.data), cid: made.cid.toString() }
    }
    default:
      throw new Error(`unknown make kind ${command.kind}`)
  }
}

// blobs.encode re-encodes a decoded value and names it by sha2-256: the CID the client gives a blob it publishes.
function bytesAnswer (bytes) {
  const data = new Uint8Array(bytes)
  return { hex: hex(data), cid: blobs.encode(decode(data)).cid.toString() }
}

async function verify (command) {
  const data = fromHex(command.hex)
  const decoded = decode(data)
  const ok = blobs.verify(decoded)
  const answer = { ok, cid: blobs.encode(decoded).cid.toString(), type: decoded.type ?? null }
  if (command.cid !== undefined) {
    try {
      blobs.decodeBlob(data, CID.parse(command.cid))
      answer.cidAccepted = true
    } catch {
      answer.cidAccepted = false
    }
  }
  return answer
}

async function answer (command) {
  switch (command.op) {
    case 'account':
      return { account: blobs.principalToString(keyOf(command.seed).principal) }
    case 'verify':
      return verify(command)
    case 'make': {
      const made = await make(command)
      return { ...made, ok: blobs.verify(decode(fromHex(made.hex))) }
    }
    case 'recordId':
      return { id: await comments.commentRecordIdFromBlob(fromHex(command.hex)) }
    case 'unpack':
      return { result: unpackHmId(command.id) }
    case 'pack':
      return { result: packHmId(command.hmId) }
    case 'repack':
      return { result: packHmId(unpackHmId(command.id)) }
    default:
      throw new Error(`unknown op ${command.op}`)
  }
}

await blobs.nativeCryptoReady
const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const commands = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const results = []
for (const command of commands) {
  try {
    results.push(await answer(command))
  } catch (err) {
    results.push({ error: String(err && err.message ? err.message : err) })
  }
}
process.stdout.write(JSON.stringify(results) + '\n')
