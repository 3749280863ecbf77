// Reads `count` records of a topic from the beginning and prints their values as one
// JSON line: node read_topic.js <bootstrap> <topic> <count>
const { Kafka, logLevel } = require('kafkajs')
const [bs, topic, count] = [process.argv[2], process.argv[3], parseInt(process.argv[4], 10)]
const kafka = new Kafka({ clientId: 'kjs-reader', brokers: [bs], logLevel: logLevel.ERROR })
async function main() {
  const c = kafka.consumer({ groupId: 'kjs-reader-' + topic + '-' + Date.now() })
  await c.connect()
  await c.subscribe({ topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout ' + got.length)), 30000)
    c.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()); if (got.length >= count) { clearTimeout(timer); resolve() } } })
  })
  await c.disconnect()
  console.log(JSON.stringify({ got }))
}
main().catch(e => { console.error('FAILED', e); process.exit(1) })
