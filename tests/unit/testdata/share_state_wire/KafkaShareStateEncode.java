// Encodes with Apache Kafka's own serializers, as the oracle for tests/unit/test_share_state_wire.py
// (run by generate.py; see there). Reads lines on stdin and prints one hex line per input line:
//   message <MessageName> <version> <json>   a request/response body (org.apache.kafka.common.message)
//   record <KeyName> <ValueName|-> <keyjson> <valuejson|->
//                                            a __share_group_state record through Kafka's
//                                            ShareCoordinatorRecordSerde: "<key hex>/<value hex or ->"
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class KafkaShareStateEncode {
    static final ObjectMapper MAPPER = new ObjectMapper();

    static Object read(String converter, String json, short version) throws Exception {
        JsonNode node = MAPPER.readTree(json);
        return Class.forName(converter).getMethod("read", JsonNode.class, short.class).invoke(null, node, version);
    }

    static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b));
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ShareCoordinatorRecordSerde serde = new ShareCoordinatorRecordSerde();
        String generated = "org.apache.kafka.coordinator.share.generated.";
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", 2);
            if (parts[0].equals("message")) {
                String[] m = parts[1].split(" ", 3);
                short version = Short.parseShort(m[1]);
                Message message = (Message) read("org.apache.kafka.common.message." + m[0] + "DataJsonConverter", m[2], version);
                ByteBuffer buffer = MessageUtil.toByteBufferAccessor(message, version).buffer();
                byte[] bytes = new byte[buffer.remaining()];
                buffer.get(bytes);
                System.out.println(hex(bytes));
            } else {
                String[] r = parts[1].split(" ", 4);
                ApiMessage key = (ApiMessage) read(generated + r[0] + "JsonConverter", r[2], (short) 0);
                CoordinatorRecord record = r[1].equals("-") ? CoordinatorRecord.tombstone(key)
                    : CoordinatorRecord.record(key, new ApiMessageAndVersion(
                        (ApiMessage) read(generated + r[1] + "JsonConverter", r[3], (short) 0), (short) 0));
                byte[] value = serde.serializeValue(record);
                System.out.println(hex(serde.serializeKey(record)) + "/" + (value == null ? "-" : hex(value)));
            }
        }
    }
}
