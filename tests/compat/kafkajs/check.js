// KafkaJS against raftka: one scenario per run, driven by tests/compat/test_kafkajs.py.
// Usage: node check.js SCENARIO BOOTSTRAP [ARG...]; prints JSON lines ({"event": ...}) on stdout,
// the last being {"event": "done", ...} on success. Every scenario stops by itself (timeouts).
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [scenario, bootstrap, ...args] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'raftka-kafkajs-check',
  brokers: bootstrap.split(','),
  logLevel: logLevel.ERROR,
  retry: { retries: 20, initialRetryTime: 100, maxRetryTime: 2000 },
  connectionTimeout: 5000,
  requestTimeout: 30000,
});

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function deadline(ms, what) {
  return setTimeout(() => { emit('timeout', { what }); process.exit(3); }, ms).unref();
}

async function admin() {
  const [topic] = args;
  const a = kafka.admin();
  await a.connect();
  const created = await a.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 3 }], waitForLeaders: true });
  const listed = await a.listTopics();
  const meta = await a.fetchTopicMetadata({ topics: [topic] });
  const part0 = meta.topics[0].partitions.find((p) => p.partitionId === 0);
  const offsets = await a.fetchTopicOffsets(topic);
  const cluster = await a.describeCluster();
  const configs = await a.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false });
  const again = await a.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 3 }] });
  await a.deleteTopics({ topics: [topic], timeout: 30000 });
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    gone = !(await a.listTopics()).includes(topic);
    if (!gone) await new Promise((r) => setTimeout(r, 100));
  }
  await a.disconnect();
  emit('done', {
    created, again, listed: listed.includes(topic), partitions: meta.topics[0].partitions.length,
    replicas: part0.replicas.length, isr: part0.isr.length, offsets: offsets.map((o) => [o.partition, o.high]),
    brokers: cluster.brokers.length, controller: cluster.controller,
    configEntries: configs.resources[0].configEntries.length, gone,
  });
}

async function produce() {
  const [topic, count, pauseAt] = [args[0], Number(args[1]), Number(args[2] || -1)];
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  for (let i = 0; i < count; i++) {
    await producer.send({ topic, acks: -1, messages: [{ key: `k${i % 7}`, value: `v${i}` }] });
    if (i + 1 === pauseAt) emit('sent', { n: i + 1 });
  }
  await producer.disconnect();
  emit('done', { sent: count });
}

async function group() {
  // N members in one process, each its own consumer; members join one by one (rebalances),
  // then the group reads `count` records; every record must be seen exactly once.
  const [topic, groupId, members, count] = [args[0], args[1], Number(args[2]), Number(args[3])];
  const seen = new Map();
  const consumers = [];
  let assignments = 0;
  for (let m = 0; m < members; m++) {
    const c = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, rebalanceTimeout: 20000 });
    c.on(c.events.GROUP_JOIN, () => { assignments += 1; });
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({
      autoCommitInterval: 500,
      eachMessage: async ({ partition, message }) => {
        const v = message.value.toString();
        seen.set(v, (seen.get(v) || 0) + 1);
      },
    });
    consumers.push(c);
  }
  emit('joined', { members });
  const until = Date.now() + 90000;
  while (seen.size < count && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  await Promise.all(consumers.map((c) => c.disconnect()));
  const dups = [...seen.values()].filter((n) => n > 1).length;
  emit('done', { distinct: seen.size, duplicates: dups, joins: assignments });
}

async function consume() {
  // Everything in the topic from the beginning, in partition order: [partition, offset, value].
  const [topic, count] = [args[0], Number(args[1])];
  const c = kafka.consumer({ groupId: `read-${Date.now()}`, sessionTimeout: 10000 });
  const got = [];
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  await c.run({ eachMessage: async ({ partition, message }) => { got.push([partition, Number(message.offset), message.value.toString()]); } });
  const until = Date.now() + 60000;
  while (got.length < count && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 500)); // anything beyond `count` would show up here
  await c.disconnect();
  emit('done', { records: got });
}

async function reassign() {
  // Move partition 0 of `topic` to `target` (comma-separated ids): alterPartitionReassignments,
  // then listPartitionReassignments and the topic metadata until the move is over; also a
  // refused request (an unknown broker) to see the error KafkaJS raises.
  const [topic, target] = [args[0], args[1].split(',').map(Number)];
  const a = kafka.admin();
  await a.connect();
  let refused = null;
  try {
    await a.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [9999] }] }] });
  } catch (err) {
    refused = err.type || (err.errors ? err.errors.map((e) => e.type).join(',') : err.name);
  }
  await a.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: target }] }] });
  const listedDuring = await a.listPartitionReassignments({ topics: [{ topic, partitions: [0] }] });
  let part0 = null;
  let listedAfter = null;
  const until = Date.now() + 90000;
  while (Date.now() < until) {
    const meta = await a.fetchTopicMetadata({ topics: [topic] });
    part0 = meta.topics[0].partitions.find((p) => p.partitionId === 0);
    listedAfter = await a.listPartitionReassignments({});
    if (part0.replicas.join(',') === target.join(',') && part0.isr.length === target.length
        && listedAfter.topics.length === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await a.disconnect();
  emit('done', { refused, listedDuring: listedDuring.topics, replicas: part0.replicas, isr: part0.isr,
                 leader: part0.leader, listedAfter: listedAfter.topics });
}

const scenarios = { admin, produce, group, consume, reassign };
deadline(150000, scenario);
scenarios[scenario]().then(() => process.exit(0), (err) => {
  emit('error', { name: err.name, message: err.message, type: err.type || null });
  process.exit(1);
});
