// An idempotent producer, a committed and an aborted transaction, then a read_committed
// consumer in a group read to the end of the topic, and a read_uncommitted one: prints one
// JSON line for the Python test to check.
const { Kafka, logLevel } = require('kafkajs')
const fs = require('fs')
const bs = process.argv[2]
// Optional: {"ca": "ca.pem", "sasl": {"mechanism": "scram-sha-256", "username": ..., "password": ...}}
const security = process.argv[3] ? JSON.parse(process.argv[3]) : {}
const kafka = new Kafka({
  clientId: 'kjs', brokers: [bs], logLevel: logLevel.ERROR,
  ssl: security.ca ? { ca: [fs.readFileSync(security.ca, 'utf-8')] } : undefined,
  sasl: security.sasl,
})
async function main() {
  const topic = 'kjs-' + Date.now() + '-' + Math.floor(Math.random() * 1e6)
  const admin = kafka.admin(); await admin.connect(); await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }); await admin.disconnect()
  const p = kafka.producer({ idempotent: true, maxInFlightRequests: 1 }); await p.connect()
  await p.send({ topic, messages: Array.from({length: 50}, (_, i) => ({ value: 'v' + i, partition: i % 2 })) })
  await p.disconnect()
  const tp = kafka.producer({ transactionalId: 'kjs-txn-' + topic, maxInFlightRequests: 1, idempotent: true }); await tp.connect()
  let txn = await tp.transaction(); await txn.send({ topic, messages: [{ value: 'committed', partition: 0 }] }); await txn.commit()
  txn = await tp.transaction(); await txn.send({ topic, messages: [{ value: 'aborted', partition: 0 }] }); await txn.abort()
  await tp.disconnect()
  // The end of each partition: a last record after the transactions. A reader that has
  // seen it on both partitions has read past the aborted record and its marker.
  const last = kafka.producer(); await last.connect()
  await last.send({ topic, messages: [{ value: 'end', partition: 0 }, { value: 'end', partition: 1 }] })
  await last.disconnect()
  const readToEnd = async (readUncommitted) => {
    const c = kafka.consumer({ groupId: 'kjs-g-' + readUncommitted + '-' + topic, readUncommitted }); await c.connect()
    await c.subscribe({ topic, fromBeginning: true })
    const got = []
    const ended = new Set()
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timeout ' + got.length)), 30000)
      c.run({ eachMessage: async ({ partition, message }) => {
        const value = message.value.toString()
        if (value === 'end') ended.add(partition); else got.push(value)
        if (ended.size === 2) { clearTimeout(timer); resolve() }
      } })
    })
    await c.disconnect()
    return got
  }
  // read_committed (the group's answer) and read_uncommitted (the aborted record is in the log).
  const [got, everything] = await Promise.all([readToEnd(false), readToEnd(true)])
  console.log(JSON.stringify({ got, everything }))
}
main().catch(e => { console.error('FAILED', e); process.exit(1) })
