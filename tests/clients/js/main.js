'use strict'
// kafkajs's scenarios against a Kafka-protocol server:
//
//   node main.js SCENARIO BOOTSTRAP
//
// with SCENARIO one of lifecycle, txn and cluster (against several brokers). Each prints one
// JSON line {"result": {...}} on stdout with "ok" and "failures"; where the driver
// (tests/test_js_clients.py) must act, it prints {"event": NAME, "target": ...} and waits for
// one line on stdin. Client logs go to stderr.

const readline = require('readline')
const { Kafka, logLevel, AssignerProtocol } = require('kafkajs')

const PARTITIONS = 6
const BATCH = 60
const WAIT_MS = 60000

// ---- driver protocol ----

const lines = []
const waiters = []
readline.createInterface({ input: process.stdin }).on('line', line => {
  const waiter = waiters.shift()
  if (waiter) waiter(line)
  else lines.push(line)
})

/** Tell the driver to act (on a group or topic) and wait until it says it has. */
function event(name, target) {
  const message = { event: name }
  if (target) message.target = target
  process.stdout.write(JSON.stringify(message) + '\n')
  if (lines.length) return Promise.resolve(lines.shift())
  return new Promise(resolve => waiters.push(resolve))
}

const pause = ms => new Promise(resolve => setTimeout(resolve, ms))

/** Poll a condition (no blind sleeps); false when it did not hold in time. */
async function until(cond, timeout = WAIT_MS) {
  const deadline = Date.now() + timeout
  for (;;) {
    if (await cond()) return true
    if (Date.now() > deadline) return false
    await pause(50)
  }
}

/** A scenario's outcome: figures, and failed checks with their detail. */
class Result {
  constructor(scenario) {
    this.fields = { scenario }
    this.failures = []
  }
  put(k, v) {
    this.fields[k] = v
  }
  fail(what) {
    this.failures.push(what)
  }
  check(name, ok, detail) {
    if (!ok) this.fail(`${name}: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`)
    return ok
  }
  out() {
    return { ...this.fields, ok: this.failures.length === 0, failures: this.failures }
  }
}

/** What was produced, delivered and acknowledged as committed: every produced record must be
 * delivered, and none again once a commit the broker acknowledged covered it (a redelivery
 * past the last acknowledged commit is at-least-once: allowed, counted). */
class Ledger {
  constructor() {
    this.produced = new Set()
    this.delivered = new Map()
    this.acked = new Map()
    this.redelivered = 0
    this.violations = {}
  }
  addProduced(p, o) {
    this.produced.add(`${p}:${o}`)
  }
  deliver(member, p, o) {
    const k = `${p}:${o}`
    const n = (this.delivered.get(k) || 0) + 1
    this.delivered.set(k, n)
    if (n > 1) {
      this.redelivered++
      if (o < (this.acked.get(p) || 0)) {
        this.violations[k] = `${member} got it again after a commit at ${this.acked.get(p)}`
      }
    }
  }
  /** Offsets (the next offset to read) the broker acknowledged as committed. */
  ack(p, next) {
    if (next > (this.acked.get(p) || 0)) this.acked.set(p, next)
  }
  missing() {
    return [...this.produced].filter(k => !this.delivered.has(k))
  }
  /** Partitions whose acknowledged commit is short of what was produced: {p: [acked, end]}. */
  uncommitted() {
    const ends = {}
    for (const k of this.produced) {
      const [p, o] = k.split(':').map(Number)
      ends[p] = Math.max(ends[p] || 0, o + 1)
    }
    const out = {}
    for (const [p, end] of Object.entries(ends)) {
      const acked = this.acked.get(Number(p)) || 0
      if (acked < end) out[p] = [acked, end]
    }
    return out
  }
}

function client(clientId, bootstrap) {
  return new Kafka({
    clientId,
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    // kafkajs logs to stdout by default; the driver reads stdout for events and the result.
    logCreator: () => ({ namespace, level, log }) => {
      const { message, ...extra } = log
      process.stderr.write(`${new Date().toISOString()} ${clientId} ${namespace} [${level}] ${message} ${JSON.stringify(extra)}\n`)
    },
    retry: { initialRetryTime: 100, retries: 5 },
  })
}

const sorted = ps => [...ps].sort((a, b) => a - b)
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)

/** {partition: offset} of the group's committed offsets and of the topic's log end. */
async function offsets(admin, group, topic) {
  const [fetched] = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const committed = {}
  for (const { partition, offset } of fetched.partitions) committed[partition] = Number(offset)
  const ends = {}
  for (const { partition, high } of await admin.fetchTopicOffsets(topic)) ends[partition] = Number(high)
  return { committed, ends }
}

// ---- consumer group life cycle ----

class Lifecycle {
  constructor(scenario, bootstrap, res) {
    this.scenario = scenario
    this.bootstrap = bootstrap
    this.res = res
    this.topic = this.group = `js-${scenario}`
    this.ledger = new Ledger()
    this.members = {}
    this.n = 0
    this.kafka = client(`js-${scenario}-admin`, bootstrap)
    this.admin = this.kafka.admin()
    this.producer = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  }

  /** A member: its own kafkajs client and consumer, eager RoundRobinAssigner (kafkajs's only
   * protocol), committing each batch with commitOffsets once it is processed. */
  async start(name) {
    const clientId = `js-${this.scenario}-${name}`
    const consumer = client(clientId, this.bootstrap).consumer({
      groupId: this.group,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 500,
      maxWaitTimeInMs: 250,
    })
    const m = { name, clientId, consumer, own: [], first: {}, joins: 0, commits: 0 }
    consumer.on(consumer.events.GROUP_JOIN, e => {
      m.own = sorted(e.payload.memberAssignment[this.topic] || [])
      m.joins++
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [this.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
        let next = null
        for (const message of batch.messages) {
          if (!isRunning() || isStale()) break
          const o = Number(message.offset)
          this.ledger.deliver(name, batch.partition, o)
          if (!(batch.partition in m.first)) m.first[batch.partition] = o
          resolveOffset(message.offset)
          next = o + 1
        }
        if (next === null) return
        // A failed commit (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION) throws to kafkajs, which
        // rejoins; the records it covered may come again, which the ledger allows.
        await consumer.commitOffsets([{ topic: this.topic, partition: batch.partition, offset: String(next) }])
        m.commits++
        this.ledger.ack(batch.partition, next)
      },
    })
    this.members[name] = m
  }

  async stop(name) {
    await this.members[name].consumer.disconnect()
    delete this.members[name]
  }

  /** A batch of records, round-robin over the partitions, with the offsets the broker gave. */
  async produce() {
    const byPartition = {}
    for (let i = 0; i < BATCH; i++, this.n++) {
      const p = this.n % PARTITIONS
      ;(byPartition[p] = byPartition[p] || []).push({ key: `k${this.n}`, value: `v${this.n}`, partition: p })
    }
    const acks = await this.producer.send({ topic: this.topic, acks: -1, messages: Object.values(byPartition).flat() })
    for (const { partition, baseOffset, errorCode } of acks) {
      this.res.check(`produce p${partition}`, errorCode === 0, `error ${errorCode}`)
      for (let i = 0; i < byPartition[partition].length; i++) this.ledger.addProduced(partition, Number(baseOffset) + i)
    }
  }

  /** Wait until everything produced is delivered, and committed by a commit the broker
   * acknowledged (a member that crashed and restarted reads again from the last commit), and
   * the describe matches the members. */
  async step(name, expected) {
    const delivered = await until(() => this.ledger.missing().length === 0)
    this.res.check(`${name} delivered`, delivered, `missing ${this.ledger.missing()}`)
    const committed = await until(() => Object.keys(this.ledger.uncommitted()).length === 0)
    this.res.check(`${name} committed`, committed, this.ledger.uncommitted())
    let last = ''
    const ok = await until(async () => {
      last = await this.describeMismatch(expected)
      return last === ''
    })
    this.res.check(`${name} describe`, ok, last)
    const owned = {}
    for (const [n, m] of Object.entries(this.members)) owned[n] = m.own
    this.res.put(`assignment ${name}`, owned)
  }

  /** Empty when kafkajs's describeGroups shows the group Stable with the expected members,
   * each with what it owns (its last GROUP_JOIN), and every partition assigned once. */
  async describeMismatch(expected) {
    let group
    try {
      group = (await this.admin.describeGroups([this.group])).groups[0]
    } catch (e) {
      return `describeGroups: ${e.message}`
    }
    if (group.errorCode !== 0) return `error ${group.errorCode}`
    if (group.state !== 'Stable') return `state ${group.state}`
    if (group.protocolType !== 'consumer' || group.protocol !== 'RoundRobinAssigner') {
      return `protocol ${group.protocolType}/${group.protocol}`
    }
    if (group.members.length !== expected) return `${group.members.length} members`
    const seen = []
    for (const member of group.members) {
      const decoded = AssignerProtocol.MemberAssignment.decode(member.memberAssignment)
      const described = sorted((decoded && decoded.assignment[this.topic]) || [])
      const m = Object.values(this.members).find(x => x.clientId === member.clientId)
      if (!m) return `unknown member ${member.clientId}`
      // Kafka describes a member's host as java.net.InetAddress.toString(): "/" and the address.
      if (!member.clientHost.startsWith('/')) return `${m.name} described at host ${member.clientHost}`
      if (!same(described, m.own)) return `${m.name} owns ${m.own}, described ${described}`
      seen.push(...described)
    }
    if (!same(sorted(seen), [...Array(PARTITIONS).keys()])) return `partitions assigned ${sorted(seen)}`
    return ''
  }

  async checkCommitted(name) {
    const { committed, ends } = await offsets(this.admin, this.group, this.topic)
    this.res.check(name, same(committed, ends), { committed, ends })
    return committed
  }

  async run() {
    await this.admin.connect()
    await this.producer.connect()
    const replicas = this.scenario === 'cluster' ? 3 : 1
    await this.admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic: this.topic, numPartitions: PARTITIONS, replicationFactor: replicas }],
    })
    try {
      if (this.scenario === 'cluster') await this.runCluster()
      else await this.runLifecycle()
    } finally {
      for (const name of Object.keys(this.members)) await this.stop(name).catch(() => {})
      await this.producer.disconnect()
      await this.admin.disconnect()
      this.res.put('produced', this.ledger.produced.size)
      this.res.put('missing', this.ledger.missing())
      this.res.put('redelivered', this.ledger.redelivered)
      this.res.put('violations', this.ledger.violations)
    }
  }

  // Two members join, a third joins, one leaves, the server restarts, all leave; one restarts
  // and resumes at the committed offsets. kafkajs has no static membership (KIP-345), so no static restart.
  async runLifecycle() {
    await this.produce()
    await Promise.all(['c1', 'c2'].map(n => this.start(n)))
    await this.step('join', 2)

    await this.start('c3')
    await this.produce()
    await this.step('member-joins', 3)

    await this.stop('c1')
    await this.produce()
    await this.step('member-leaves', 2)

    // The server restarts (same port and data dir): the members reconnect, and the group,
    // loaded again from its log, takes them back.
    await event('restart-server')
    await this.produce()
    await this.step('server-restart', 2)

    for (const name of Object.keys(this.members)) await this.stop(name)
    const committed = await this.checkCommitted('committed = log end after close')
    const { groups } = await this.admin.describeGroups([this.group])
    this.res.check('empty after close', groups[0].state === 'Empty' && groups[0].members.length === 0, groups[0].state)

    // A member restarts (a new kafkajs consumer, the same client id) and resumes where the
    // group committed: it sees only the new batch.
    await this.produce()
    await this.start('c2')
    await this.step('restart-resume', 1)
    for (const [p, o] of Object.entries(this.members.c2.first)) {
      this.res.check(`resume p${p}`, o === committed[p], `first offset ${o}, committed ${committed[p]}`)
    }
    this.res.check('resumed on every partition', Object.keys(this.members.c2.first).length === PARTITIONS, this.members.c2.first)
    await this.stop('c2')
    this.res.put('committed', await this.checkCommitted('committed = log end at the end'))
  }

  // Against three brokers: the group's coordinator moves (NOT_COORDINATOR, then the new one
  // loads the group from its __consumer_offsets partition), then the broker now coordinating
  // it stops; the members carry on.
  async runCluster() {
    await this.produce()
    await Promise.all(['c1', 'c2'].map(n => this.start(n)))
    await this.step('join', 2)
    for (const [ev, step] of [
      ['move-coordinator', 'coordinator-move'],
      ['stop-coordinator', 'broker-stop'],
    ]) {
      await event(ev, this.group)
      await this.produce()
      await this.step(step, 2)
    }
    for (const name of Object.keys(this.members)) await this.stop(name)
    this.res.put('committed', await this.checkCommitted('committed = log end after close'))
  }
}

// ---- idempotent and transactional producers ----

/** Read a topic with a group consumer until `enough(values)`; the values in delivery order
 * per partition. */
async function readAll(kafka, topic, group, readUncommitted, enough) {
  const consumer = kafka.consumer({ groupId: group, readUncommitted, maxWaitTimeInMs: 250 })
  const values = []
  const byPartition = {}
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      values.push(message.value.toString())
      ;(byPartition[partition] = byPartition[partition] || []).push(message.value.toString())
    },
  })
  const ok = await until(() => enough(values))
  await consumer.disconnect()
  return { ok, values, byPartition }
}

const counts = values => values.reduce((acc, v) => ((acc[v] = (acc[v] || 0) + 1), acc), {})

async function runTxn(bootstrap, res) {
  const kafka = client('js-txn', bootstrap)
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({
    waitForLeaders: true,
    topics: ['js-idem', 'js-txn-in', 'js-txn-out'].map(topic => ({ topic, numPartitions: 3, replicationFactor: 1 })),
  })

  // Idempotent producer: 200 records in four sends; each in the log once, in order.
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let s = 0; s < 4; s++) {
    const messages = []
    for (let i = s * 50; i < (s + 1) * 50; i++) messages.push({ value: `i${i}`, partition: i % 3 })
    await producer.send({ topic: 'js-idem', acks: -1, messages })
  }
  const idem = await readAll(kafka, 'js-idem', 'js-idem-reader', false, v => v.length >= 200)
  const idemCounts = counts(idem.values)
  res.check('idempotent: each record once', idem.values.length === 200 && Object.keys(idemCounts).length === 200, {
    read: idem.values.length,
  })
  for (const [p, vs] of Object.entries(idem.byPartition)) {
    const ns = vs.map(v => Number(v.slice(1)))
    res.check(`idempotent: p${p} in order`, same(ns, sorted(ns)), ns)
  }

  // Input for consume-transform-produce.
  const input = []
  for (let i = 0; i < 100; i++) input.push({ value: `in${i}`, partition: i % 3 })
  await producer.send({ topic: 'js-txn-in', acks: -1, messages: input })

  // A transaction of the transactional producer aborted before the others: its records stay
  // in the log, hidden from read_committed readers.
  const txnProducer = kafka.producer({ transactionalId: 'js-txn', idempotent: true, maxInFlightRequests: 1 })
  await txnProducer.connect()
  const aborted = await txnProducer.transaction()
  await aborted.send({ topic: 'js-txn-out', messages: [...Array(9).keys()].map(i => ({ value: `aborted${i}`, partition: i % 3 })) })
  await aborted.abort()

  // Consume-transform-produce: each batch's output and the group's offsets in one transaction
  // (sendOffsets: AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator).
  const consumer = kafka.consumer({ groupId: 'js-txn-group', maxWaitTimeInMs: 250 })
  let processed = 0
  let transactions = 0
  await consumer.connect()
  await consumer.subscribe({ topics: ['js-txn-in'], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      if (batch.messages.length === 0) return
      const txn = await txnProducer.transaction()
      try {
        await txn.send({
          topic: 'js-txn-out',
          messages: batch.messages.map(m => ({ value: `T:${m.value}`, partition: batch.partition })),
        })
        await txn.sendOffsets({
          consumerGroupId: 'js-txn-group',
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }] }],
        })
        await txn.commit()
      } catch (e) {
        await txn.abort().catch(() => {})
        throw e
      }
      transactions++
      processed += batch.messages.length
      for (const m of batch.messages) resolveOffset(m.offset)
    },
  })
  res.check('all input processed', await until(() => processed >= 100), { processed })
  await consumer.disconnect()
  res.put('transactions', transactions)

  const expected = input.map(m => `T:${m.value}`).sort()
  const committedRead = await readAll(kafka, 'js-txn-out', 'js-out-committed', false, v => v.length >= 100)
  res.check('read_committed: the transformed input once each', same([...committedRead.values].sort(), expected), {
    read: committedRead.values.length,
    aborted: committedRead.values.filter(v => v.startsWith('aborted')),
  })
  const uncommittedRead = await readAll(kafka, 'js-txn-out', 'js-out-uncommitted', true, v => v.length >= 109)
  res.check(
    'read_uncommitted: the aborted records too',
    same([...uncommittedRead.values].sort(), [...expected, ...[...Array(9).keys()].map(i => `aborted${i}`)].sort()),
    { read: uncommittedRead.values.length }
  )
  const { committed, ends } = await offsets(admin, 'js-txn-group', 'js-txn-in')
  res.check("the group's offsets = the input's log end", same(committed, ends), { committed, ends })

  // A second instance with the same transactional.id fences the first: its first transaction()
  // sends InitProducerId (kafkajs does it there, not in connect()), which bumps the epoch, and
  // the old one's next transaction fails with INVALID_PRODUCER_EPOCH (what Kafka answers
  // AddPartitionsToTxn below v2 instead of KIP-588's PRODUCER_FENCED).
  const second = kafka.producer({ transactionalId: 'js-txn', idempotent: true, maxInFlightRequests: 1 })
  await second.connect()
  const secondTxn = await second.transaction()
  let fenced = null
  try {
    const txn = await txnProducer.transaction()
    await txn.send({ topic: 'js-txn-out', messages: [{ value: 'zombie', partition: 0 }] })
    await txn.commit()
  } catch (e) {
    fenced = e.type || e.name
  }
  res.check('fenced by a new instance', fenced === 'INVALID_PRODUCER_EPOCH', fenced)
  await secondTxn.abort()
  await second.disconnect()
  await txnProducer.disconnect().catch(() => {})
  await producer.disconnect()
  await admin.disconnect()
}

async function main() {
  const [scenario, bootstrap] = process.argv.slice(2)
  if (!bootstrap || !['lifecycle', 'cluster', 'txn'].includes(scenario)) {
    process.stderr.write('usage: node main.js lifecycle|txn|cluster BOOTSTRAP\n')
    process.exit(2)
  }
  const res = new Result(scenario)
  res.put('group', `js-${scenario}`)
  res.put('topic', `js-${scenario}`)
  try {
    if (scenario === 'txn') await runTxn(bootstrap, res)
    else await new Lifecycle(scenario, bootstrap, res).run()
  } catch (e) {
    res.fail(`error: ${e.stack || e}`)
  }
  process.stdout.write(JSON.stringify({ result: res.out() }) + '\n', () => process.exit(0))
}

main()
