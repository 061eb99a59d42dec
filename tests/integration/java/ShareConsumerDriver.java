// Apache Kafka's own KafkaShareConsumer (kafka-clients 4.4), driven by
// tests/integration/test_share_java_consumer.py: java -cp '<libs>/*' ShareConsumerDriver.java
// <bootstrap> <group> <topic> <mode>. It prints one line per event on stdout, flushed:
//   ACQ <partition> <offset> <delivery count> <value>   a record delivered to this consumer
//   OK <partition> <offset> <value>                     its ACCEPT (or RELEASE: REL) committed
//   FAIL <partition> <offset> <error>                   the commit failed or its outcome is unknown
// Modes: "accept" accepts every record, except that a value starting with "release" is
// released on its first delivery; "hold" acknowledges nothing after its first records (a
// consumer that hangs: the test kills it). A line "stop" on stdin (or its end) closes the
// consumer, which then prints CLOSED.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsumerDriver {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("request.timeout.ms", "10000");
        props.put("reconnect.backoff.max.ms", "500");
        AtomicBoolean stop = new AtomicBoolean(false);
        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(props, new StringDeserializer(), new StringDeserializer());
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception ignored) { }
            stop.set(true);
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();
        consumer.subscribe(List.of(topic));
        say("SUBSCRIBED");
        boolean held = false;
        try {
            while (!stop.get()) {
                if (held) {
                    Thread.sleep(100);
                    continue;
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    got.add(r);
                    say("ACQ " + r.partition() + " " + r.offset() + " " + r.deliveryCount().orElse((short) -1)
                        + " " + r.value());
                }
                if (got.isEmpty()) {
                    continue;
                }
                if (mode.equals("hold")) {
                    held = true;
                    continue;
                }
                List<String> outcome = new ArrayList<>();
                for (ConsumerRecord<String, String> r : got) {
                    boolean release = r.value().startsWith("release") && r.deliveryCount().orElse((short) 0) == 1;
                    consumer.acknowledge(r, release ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    outcome.add((release ? "REL " : "OK ") + r.partition() + " " + r.offset() + " " + r.value());
                }
                Map<TopicIdPartition, Optional<KafkaException>> result;
                try {
                    result = consumer.commitSync(Duration.ofSeconds(15));
                } catch (WakeupException e) {
                    throw e;
                } catch (Exception e) {
                    for (ConsumerRecord<String, String> r : got) {
                        say("FAIL " + r.partition() + " " + r.offset() + " " + e.getClass().getSimpleName());
                    }
                    continue;
                }
                for (int i = 0; i < got.size(); i++) {
                    ConsumerRecord<String, String> r = got.get(i);
                    Optional<KafkaException> error = Optional.empty();
                    boolean answered = false;
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
                        if (e.getKey().partition() == r.partition()) {
                            error = e.getValue();
                            answered = true;
                        }
                    }
                    if (answered && error.isEmpty()) {
                        say(outcome.get(i));
                    } else {
                        say("FAIL " + r.partition() + " " + r.offset() + " "
                            + error.map(x -> x.getClass().getSimpleName()).orElse("unanswered"));
                    }
                }
            }
        } catch (WakeupException e) {
            // stop asked
        }
        consumer.close(Duration.ofSeconds(10));
        say("CLOSED");
    }
}
