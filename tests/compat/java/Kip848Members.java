// Members of one consumer group on Apache Kafka's own Java consumer (kafka-clients), with
// group.protocol=consumer (KIP-848). Driven by tests/compat/test_kip848_java.py through stdin,
// one command a line:
//   start <i>   a member i joins (its own KafkaConsumer on its own thread) and consumes
//   stop <i>    member i closes: it commits what it consumed and leaves the group
//   quit        every member closes, then the program exits
// and reporting one JSON object a line on stdout: assigned / revoked / lost (the partitions of
// the rebalance callbacks), records (partition, offset, value of each record a poll returned,
// printed before the commit that follows), committed, error, closed. Each member commits
// synchronously after every poll that returned records, and in onPartitionsRevoked.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Kip848Members {
    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    static String partitions(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(Integer.toString(tp.partition()));
        return "[" + String.join(",", out) + "]";
    }

    static final class Member implements Runnable, ConsumerRebalanceListener {
        final int id;
        final KafkaConsumer<String, String> consumer;
        final String topic;
        final AtomicBoolean running = new AtomicBoolean(true);
        final Map<TopicPartition, Long> consumed = new HashMap<>();  // the next offset to read
        final Thread thread;

        Member(int id, String bootstrap, String group, String topic) {
            this.id = id;
            this.topic = topic;
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group);
            p.put("group.protocol", "consumer");
            p.put("client.id", "kip848-java-" + id);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("max.poll.records", "50");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            this.consumer = new KafkaConsumer<>(p);
            this.thread = new Thread(this, "member-" + id);
        }

        void event(String name, String rest) {
            emit("{\"event\":" + quote(name) + ",\"member\":" + id + (rest.isEmpty() ? "" : "," + rest) + "}");
        }

        public void onPartitionsAssigned(Collection<TopicPartition> tps) {
            event("assigned", "\"partitions\":" + partitions(tps));
        }

        public void onPartitionsRevoked(Collection<TopicPartition> tps) {
            // What this member consumed of them (not consumer.position(): a partition revoked
            // before its first fetch has none, and position() would wait for one).
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            for (TopicPartition tp : tps) {
                Long next = consumed.remove(tp);
                if (next != null) positions.put(tp, new OffsetAndMetadata(next));
            }
            try {
                if (!positions.isEmpty()) consumer.commitSync(positions);
            } catch (RuntimeException e) {
                event("error", "\"where\":\"revoke-commit\",\"error\":" + quote(e.toString()));
            }
            event("revoked", "\"partitions\":" + partitions(tps));
        }

        public void onPartitionsLost(Collection<TopicPartition> tps) {
            event("lost", "\"partitions\":" + partitions(tps));
        }

        public void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (running.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    if (records.isEmpty()) continue;
                    List<String> items = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : records) {
                        items.add("[" + r.partition() + "," + r.offset() + "," + quote(r.value()) + "]");
                        consumed.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    }
                    event("records", "\"records\":[" + String.join(",", items) + "]");
                    try {
                        consumer.commitSync();
                        event("committed", "");
                    } catch (RuntimeException e) {
                        event("error", "\"where\":\"commit\",\"error\":" + quote(e.toString()));
                    }
                }
            } catch (WakeupException e) {
                // stop() woke the poll up
            } catch (RuntimeException e) {
                event("error", "\"where\":\"poll\",\"error\":" + quote(e.toString()));
            } finally {
                try {
                    consumer.close(Duration.ofSeconds(60));
                } catch (RuntimeException e) {
                    event("error", "\"where\":\"close\",\"error\":" + quote(e.toString()));
                }
                event("closed", "");
            }
        }

        void stop() throws InterruptedException {
            running.set(false);
            thread.join();
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        Map<Integer, Member> members = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].equals("start")) {
                Member m = new Member(Integer.parseInt(words[1]), bootstrap, group, topic);
                members.put(m.id, m);
                m.thread.start();
            } else if (words[0].equals("stop")) {
                members.remove(Integer.parseInt(words[1])).stop();
            } else if (words[0].equals("quit")) {
                break;
            }
        }
        for (Member m : members.values()) m.running.set(false);
        for (Member m : members.values()) m.thread.join();
        emit("{\"event\":\"done\"}");
    }
}
