// The UnixFS oracle for tests/hypermedia/test_unixfs.py and bench/ipfs.py: ipfs-unixfs-importer 15.4 with its
// defaults, over bytes both sides generate from a seed (so megabytes never cross the pipe).
// stdin: {op: "cids", cases: [{size, seed}]} → [{cid, blocks, size}]
//        {op: "bench", size, seed, rounds} → {ms: [per-round import time], cid}
import { createHash } from 'node:crypto'
import { importer } from 'ipfs-unixfs-importer'

const SEGMENT = 32768

// Segment j is sha256("<seed>:<j>") repeated to 32 KiB: every 256 KiB chunk differs, and Python builds it as fast.
function bytesFor (size, seed) {
  const out = Buffer.alloc(size)
  for (let j = 0, at = 0; at < size; j++, at += SEGMENT) {
    const digest = createHash('sha256').update(`${seed}:${j}`).digest()
    const segment = Buffer.alloc(SEGMENT, digest)
    segment.copy(out, at, 0, Math.min(SEGMENT, size - at))
  }
  return out
}

// The smallest blockstore the importer accepts: blocks kept in a Map, as a node's store would hold them.
class MemoryBlockstore {
  constructor () { this.blocks = new Map() }
  async put (cid, bytes) { this.blocks.set(cid.toString(), bytes); return cid }
  async get (cid) { return this.blocks.get(cid.toString()) }
  async has (cid) { return this.blocks.has(cid.toString()) }
}

// Fed in 1 MiB pieces, as a file stream would arrive.
async function * pieces (data) {
  for (let at = 0; at < data.length || at === 0; at += 1 << 20) {
    yield data.subarray(at, Math.min(data.length, at + (1 << 20)))
    if (data.length === 0) break
  }
}

async function importData (data) {
  const store = new MemoryBlockstore()
  let root
  for await (const entry of importer([{ content: pieces(data) }], store)) root = entry
  return { cid: root.cid.toString(), blocks: store.blocks.size, size: Number(root.size) }
}

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))

if (input.op === 'cids') {
  const answers = []
  for (const c of input.cases) answers.push(await importData(bytesFor(c.size, c.seed)))
  process.stdout.write(JSON.stringify(answers))
} else if (input.op === 'bench') {
  const data = bytesFor(input.size, input.seed)
  const ms = []
  let cid
  for (let r = 0; r < input.rounds; r++) {
    const start = process.hrtime.bigint()
    cid = (await importData(data)).cid
    ms.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  process.stdout.write(JSON.stringify({ ms, cid }))
} else {
  throw new Error(`unknown op ${input.op}`)
}
