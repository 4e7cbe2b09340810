// The official client's side of the Seed web API wire format (HYPERMEDIA §4), for tests/hypermedia/test_web_api.py.
//
// stdin: a JSON array of commands; stdout: one answer per command ({"error": message} when one throws). Values that
// JSON cannot hold travel tagged: {"$bigint": "123"}, {"$date": "ISO"}, {"$bytes": hex}. Commands:
//   {"op": "request", "key", "input"}  -> {"method", "path", "body"?: hex}: what createSeedClient(...).request sends
//                                         (input validated by the client's own zod schema first)
//   {"op": "deserializeQuery", "query"} -> {"value"}: deserializeQueryString with a pass-through schema
//   {"op": "serialize", "value"}        -> {"text"}: JSON.stringify(superjson.serialize(value))
//   {"op": "deserialize", "text"}       -> {"value"}: superjson.deserialize(JSON.parse(text)), tagged
import { createSeedClient, deserializeQueryString } from '@seed-hypermedia/client/client'
import superjson from 'superjson'
import { z } from 'zod'

const fromHex = (text) => new Uint8Array(Buffer.from(text, 'hex'))

function untag (value) {
  if (Array.isArray(value)) return value.map(untag)
  if (value && typeof value === 'object') {
    if ('$bigint' in value) return BigInt(value.$bigint)
    if ('$date' in value) return new Date(value.$date)
    if ('$bytes' in value) return fromHex(value.$bytes)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, untag(v)]))
  }
  return value
}

function tag (value) {
  if (typeof value === 'bigint') return { $bigint: value.toString() }
  if (value instanceof Date) return { $date: value.toISOString() }
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString('hex') }
  if (value === undefined) return null
  if (Array.isArray(value)) return value.map(tag)
  if (value instanceof Map) return Object.fromEntries([...value].map(([k, v]) => [k, tag(v)]))
  if (value instanceof Set) return [...value].map(tag)
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, tag(v)]))
  return value
}

const BASE = 'http://oracle.invalid'
class Sent extends Error {}

async function request (key, input) {
  let sent
  const client = createSeedClient(BASE, {
    fetch: async (url, init) => {
      sent = { method: init.method, path: String(url).slice(BASE.length) }
      if (init.body) sent.body = Buffer.from(init.body).toString('hex')
      throw new Sent()
    }
  })
  try {
    await client.request(key, untag(input))
  } catch (err) {
    if (!sent) throw err
  }
  return sent
}

async function answer (command) {
  switch (command.op) {
    case 'request':
      return request(command.key, command.input)
    case 'deserializeQuery':
      return { value: tag(deserializeQueryString(command.query, z.any())) }
    case 'serialize':
      return { text: JSON.stringify(superjson.serialize(untag(command.value))) }
    case 'deserialize':
      return { value: tag(superjson.deserialize(JSON.parse(command.text))) }
    default:
      throw new Error(`unknown op ${command.op}`)
  }
}

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const out = []
for (const command of JSON.parse(Buffer.concat(chunks).toString('utf8'))) {
  try {
    out.push(await answer(command))
  } catch (err) {
    out.push({ error: String(err && err.message ? err.message : err) })
  }
}
process.stdout.write(JSON.stringify(out))
