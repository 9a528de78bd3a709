// The test oracle: Kafka's own group offset translation from MirrorMaker 2 checkpoints.
// Usage: java -cp <kafka jars>:<dir> TranslateOffsets <target bootstrap> <source alias> <group>
// Prints one line per partition: <topic> <partition> <offset>
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> translated =
            RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(30));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : translated.entrySet()) {
            System.out.println(entry.getKey().topic() + " " + entry.getKey().partition() + " " + entry.getValue().offset());
        }
    }
}
