// The official Seed client's zod schemas as the reference for tests/hypermedia/test_activity_shapes.py: a ListEvents
// response from our node must parse as HMListEventsOutput, and each LoadedEvent's parts as the types
// activity-service.ts declares them (the output schema itself lets events pass through unchecked).
//
// stdin: {"response": <ListEvents response>}; stdout: {"errors": ["<event index> <path>: <zod message>", …]}.
import * as hm from '@seed-hypermedia/client/hm-types'

const payload = JSON.parse(await new Promise((resolve) => {
  let text = ''
  process.stdin.on('data', (chunk) => { text += chunk })
  process.stdin.on('end', () => resolve(text))
}))

const errors = []
const check = (where, schema, value) => {
  const parsed = schema.safeParse(value)
  if (!parsed.success) errors.push(`${where}: ${JSON.stringify(parsed.error.issues)}`)
}

// Which LoadedEvent fields have a declared client type, per event type (activity-service.ts).
const contact = hm.HMContactItemSchema
const parts = {
  comment: { author: contact, comment: hm.HMCommentSchema, commentId: hm.unpackedHmIdSchema, target: contact, replyingComment: hm.HMCommentSchema.nullable(), replyParentAuthor: contact.nullable() },
  'doc-update': { author: contact, docId: hm.unpackedHmIdSchema },
  capability: { author: contact, capabilityId: hm.unpackedHmIdSchema, capability: hm.HMCapabilitySchema },
  contact: { author: contact },
  citation: { author: contact, source: contact, target: contact, comment: hm.HMCommentSchema.nullable().optional() }
}

check('response', hm.HMListEventsOutputSchema, payload.response)
payload.response.events.forEach((event, index) => {
  check(`${index} time`, hm.HMTimestampSchema, event.time)
  const declared = parts[event.type]
  if (!declared) return errors.push(`${index}: unknown type ${event.type}`)
  for (const [key, schema] of Object.entries(declared)) check(`${index} ${key}`, schema, event[key])
  if (event.type === 'capability') event.delegates.forEach((d, i) => check(`${index} delegates.${i}`, contact, d))
  if (event.type === 'contact') {
    check(`${index} contact.id`, hm.unpackedHmIdSchema, event.contact.id)
    check(`${index} contact.subject`, contact, event.contact.subject)
    if (event.contact.subscribe) check(`${index} contact.subscribe`, hm.HMContactSubscribeSchema, event.contact.subscribe)
  }
  if (typeof event.feedEventId !== 'string' || typeof event.eventAtMs !== 'number') errors.push(`${index}: feed fields`)
})
process.stdout.write(JSON.stringify({ errors }))
