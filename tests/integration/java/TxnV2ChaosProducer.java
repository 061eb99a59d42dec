// Apache Kafka's own Java producer (kafka-clients from the cached Kafka 4.4 jars, transaction
// version 2 where the brokers finalize it) running transactions through broker kills and
// restarts: tests/compat/test_readme_layout_txn_v2.py compiles and runs it.
//
// Usage: TxnV2ChaosProducer <bootstrap> <topic> <partitions> <transactional id> <first value> <stop file>
// Until <stop file> exists, transaction n writes 1-4 unique values (from <first value> on) to
// random partitions, then commits it or (one in three) aborts it. It prints, per transaction,
//   invoke <n> <commit|abort> <partition>:<value>,...
// and then "ok <n>" (ended as intended), "fail <n>" (an abort that failed: never committed) or
// "info <n> <error>" (a commit whose outcome is unknown). After any error the producer is closed
// and a new one initialised with the same transactional id, which fences the old one and ends
// what it left open. Prints "done" at the end.
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnV2ChaosProducer {
    static KafkaProducer<String, String> open(Properties props, Path stop) throws InterruptedException {
        while (true) {
            KafkaProducer<String, String> producer = new KafkaProducer<>(props);
            try {
                producer.initTransactions();
                return producer;
            } catch (KafkaException e) {
                System.out.println("reinit " + e.getClass().getSimpleName());
                System.out.flush();
                producer.close(Duration.ZERO);
                if (Files.exists(stop)) {
                    return null;
                }
                Thread.sleep(500);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], transactionalId = args[3];
        int partitions = Integer.parseInt(args[2]);
        long value = Long.parseLong(args[4]);
        Path stop = Paths.get(args[5]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("transactional.id", transactionalId);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("request.timeout.ms", "5000");
        props.put("delivery.timeout.ms", "15000");
        props.put("max.block.ms", "15000");
        Random rng = new Random(48);
        KafkaProducer<String, String> producer = open(props, stop);
        for (int n = 0; producer != null && !Files.exists(stop); n++) {
            boolean commit = rng.nextInt(3) != 0;
            int writes = 1 + rng.nextInt(4);
            StringBuilder line = new StringBuilder();
            long[] values = new long[writes];
            int[] parts = new int[writes];
            for (int i = 0; i < writes; i++) {
                parts[i] = rng.nextInt(partitions);
                values[i] = value++;
                line.append(i == 0 ? "" : ",").append(parts[i]).append(':').append(values[i]);
            }
            System.out.println("invoke " + n + " " + (commit ? "commit" : "abort") + " " + line);
            System.out.flush();
            try {
                producer.beginTransaction();
                for (int i = 0; i < writes; i++) {
                    producer.send(new ProducerRecord<>(topic, parts[i], null, Long.toString(values[i])));
                }
                if (commit) {
                    producer.commitTransaction();
                } else {
                    producer.flush(); // the aborted records reach the log
                    producer.abortTransaction();
                }
                System.out.println("ok " + n);
            } catch (KafkaException e) {
                System.out.println((commit ? "info " : "fail ") + n + " " + e.getClass().getSimpleName());
                System.out.flush();
                producer.close(Duration.ofSeconds(1));
                producer = open(props, stop);
            }
            System.out.flush();
            Thread.sleep(100);
        }
        if (producer != null) {
            producer.close(Duration.ofSeconds(5));
        }
        System.out.println("done");
    }
}
