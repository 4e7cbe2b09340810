// Reference DAG-CBOR encoder for tests/test_dagcbor.py.
//
// stdin: a JSON array of strings, each one JSON document. Every document is parsed with JSON.parse, so numbers
// become JavaScript numbers exactly as the reference client would see them, and three tagged forms are revived:
//   {"/": "<cid>"}               -> CID (dag-json link form)
//   {"/": {"bytes": "<base64>"}} -> Uint8Array (dag-json bytes form)
//   {"/": {"bigint": "<digits>"}} -> BigInt (ours: exact integers beyond 2^53, which JSON.parse would round)
// stdout: a JSON array with, per document, {"hex": encode(value) as hex, "cid": CIDv1 dag-cbor sha2-256 string}
// or {"error": message} when @ipld/dag-cbor refuses the value.
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'

function revive (_key, value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
  const keys = Object.keys(value)
  if (keys.length !== 1 || keys[0] !== '/') return value
  const inner = value['/']
  if (typeof inner === 'string') return CID.parse(inner)
  if (inner !== null && typeof inner === 'object' && typeof inner.bytes === 'string') {
    return new Uint8Array(Buffer.from(inner.bytes, 'base64'))
  }
  if (inner !== null && typeof inner === 'object' && typeof inner.bigint === 'string') return BigInt(inner.bigint)
  return value
}

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const documents = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const results = []
for (const text of documents) {
  try {
    const bytes = dagCbor.encode(JSON.parse(text, revive))
    const cid = CID.create(1, dagCbor.code, await sha256.digest(bytes))
    results.push({ hex: Buffer.from(bytes).toString('hex'), cid: cid.toString() })
  } catch (err) {
    results.push({ error: String(err && err.message ? err.message : err) })
  }
}
process.stdout.write(JSON.stringify(results) + '\n')
