// Apache Kafka's own Java producer (kafka-clients from the cached Kafka 4.4 jars) running
// transactions against a broker: tests/integration/test_txn_version_2_java.py compiles and runs it.
//
// Usage: TxnV2Producer <bootstrap> <topic> <transactional id> <group> <transactions>
// Transaction i writes "c-i-j" (committed) or "a-i-j" (every third one, aborted) to partitions
// 0 and 1, and sends the group's offset i + 1 for partition 0 of the topic in the transaction.
// It prints one line per transaction ("committed i" / "aborted i"), then "done".
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnV2Producer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], transactionalId = args[2], group = args[3];
        int transactions = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("transactional.id", transactionalId);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("delivery.timeout.ms", "60000");
        props.put("max.block.ms", "60000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < transactions; i++) {
                boolean commit = i % 3 != 2;
                producer.beginTransaction();
                for (int j = 0; j < 4; j++) {
                    String value = (commit ? "c-" : "a-") + i + "-" + j;
                    producer.send(new ProducerRecord<>(topic, j % 2, null, value));
                }
                producer.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(i + 1)),
                    new ConsumerGroupMetadata(group));
                producer.flush(); // every record reaches the log, the aborted ones too
                if (commit) {
                    producer.commitTransaction();
                    System.out.println("committed " + i);
                } else {
                    producer.abortTransaction();
                    System.out.println("aborted " + i);
                }
                System.out.flush();
            }
        }
        System.out.println("done");
    }
}
