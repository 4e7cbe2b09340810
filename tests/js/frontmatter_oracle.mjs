// The official client's parseFrontmatter (markdown-to-blocks, which reads YAML with the `yaml` package's core
// schema) as the reference for tests/hypermedia/markdown/test_yaml_properties.py.
//
// stdin: a JSON array of markdown texts; stdout: one {"content", "metadata"} per text ({"error"} if it throws).
import { parseFrontmatter } from '@seed-hypermedia/client/markdown-to-blocks'

process.removeAllListeners('warning') // the `yaml` package warns on unresolved tags; stdout stays JSON
process.on('warning', () => {})
const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const out = JSON.parse(Buffer.concat(chunks).toString('utf8')).map((markdown) => {
  try {
    return parseFrontmatter(markdown)
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) }
  }
})
process.stdout.write(JSON.stringify(out))
