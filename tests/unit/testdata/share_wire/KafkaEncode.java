// Encodes messages with Apache Kafka's own generated serializers, as the oracle for
// tests/unit/test_share_wire.py (run by generate.py; see there). Reads lines
// "<MessageName> <version> <json>" on stdin (JSON in Kafka's JsonConverter format) and
// prints one hex line per input line.
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

public class KafkaEncode {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 3);
            short version = Short.parseShort(parts[1]);
            Class<?> converter = Class.forName("org.apache.kafka.common.message." + parts[0] + "DataJsonConverter");
            JsonNode node = mapper.readTree(parts[2]);
            Message message = (Message) converter.getMethod("read", JsonNode.class, short.class).invoke(null, node, version);
            ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
            StringBuilder hex = new StringBuilder();
            while (buffer.hasRemaining()) hex.append(String.format("%02x", buffer.get()));
            System.out.println(hex);
        }
    }
}
