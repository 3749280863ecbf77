import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.avro.Schema;

/**
 * A schema's text as Confluent's registry writes it: for "avro", what Apache Avro's Java
 * library prints for it (Schema.toString()); for "json", the document as Jackson writes it
 * back (JsonSchema.canonicalString() writes its parsed JsonNode with an ObjectMapper). One
 * schema per line on stdin, its text per line on stdout, or "ERROR " and the parser's
 * message for a schema it refuses.
 * Run with the source launcher: java -cp '.cache/avro/libs/*' tests/java/SchemaText.java avro|json
 */
public class SchemaText {
    public static void main(String[] args) throws Exception {
        boolean avro = args[0].equals("avro");
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            try {
                out.append(avro ? new Schema.Parser().parse(line).toString()
                                : mapper.writeValueAsString(mapper.readTree(line)));
            } catch (Exception e) {
                out.append("ERROR ").append(String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            out.append('\n');
        }
        System.out.write(out.toString().getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }
}
