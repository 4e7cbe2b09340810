// Reference markdown <-> block conversions for tests/test_hm_markdown.py, from the official Seed client.
//
// stdin: one JSON object, every field optional:
//   parse:    [markdown]                         -> parseMarkdown + markdownBlockNodesToHMBlockNodes + flattenToOperations
//   render:   [{metadata, content, options}]     -> blocksToMarkdown({metadata, content}, options)
//   diff:     [{old: HMBlockNode[], markdown}]   -> computeReplaceOps(createBlocksMap(old), rebindTableIdentities(old, parse))
//   match:    [{old: HMBlockNode[], markdown}]   -> matchBlockIds(old, parse) as HMBlockNodes
//   frontmatter: [metadata]                     -> emitFrontmatter(metadata), and parseFrontmatter of that text
// stdout: the same keys, each a list of answers in order ({error} where the client threw).
//
// Block ids the parser generates come from Math.random. It is replaced by a counter so that fresh ids are
// deterministic: the n-th id generated while parsing one document is "gen" + n padded to 5 digits, which the Python
// side reproduces with new_id. Matching ids therefore also proves the port draws ids in the client's order.
import {
  flattenToOperations,
  markdownBlockNodesToHMBlockNodes,
  parseFrontmatter,
  parseMarkdown
} from '@seed-hypermedia/client/markdown-to-blocks'
import { blocksToMarkdown, emitFrontmatter } from '@seed-hypermedia/client/blocks-to-markdown'
import {
  computeReplaceOps,
  createBlocksMap,
  matchBlockIds,
  rebindTableIdentities,
  toAPIBlockNode
} from '@seed-hypermedia/client/block-diff'

const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'
let counter = 0
let pending = []
Math.random = () => {
  if (pending.length === 0) {
    const id = 'gen' + String(counter++).padStart(5, '0')
    pending = Array.from(id).map((ch) => (ID_CHARS.indexOf(ch) + 0.5) / ID_CHARS.length)
  }
  return pending.shift()
}
function resetIds () {
  counter = 0
  pending = []
}

function guard (fn) {
  try {
    return fn()
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) }
  }
}

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))

const output = {}
output.parse = (input.parse || []).map((markdown) => guard(() => {
  resetIds()
  const { tree, metadata } = parseMarkdown(markdown)
  return {
    metadata,
    tree,
    hm: markdownBlockNodesToHMBlockNodes(tree),
    ops: flattenToOperations(tree)
  }
}))
output.render = (input.render || []).map(({ metadata, content, options }) => guard(() =>
  blocksToMarkdown({ metadata, content }, options)
))
output.diff = (input.diff || []).map(({ old, markdown }) => guard(() => {
  resetIds()
  const oldNodes = old.map(toAPIBlockNode)
  const { tree } = parseMarkdown(markdown)
  return computeReplaceOps(createBlocksMap(oldNodes), rebindTableIdentities(oldNodes, tree))
}))
output.match = (input.match || []).map(({ old, markdown }) => guard(() => {
  resetIds()
  const { tree } = parseMarkdown(markdown)
  return markdownBlockNodesToHMBlockNodes(matchBlockIds(old.map(toAPIBlockNode), tree))
}))
output.frontmatter = (input.frontmatter || []).map((metadata) => guard(() => {
  const text = emitFrontmatter(metadata)
  return { text, parsed: parseFrontmatter(text + 'body\n').metadata }
}))
process.stdout.write(JSON.stringify(output) + '\n')
