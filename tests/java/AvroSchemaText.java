import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.avro.Schema;

/**
 * What Apache Avro's Java library prints for a schema (Schema.toString(), the text Confluent's
 * registry returns for an AVRO schema): one schema per line on stdin, its text per line on
 * stdout, or "ERROR " and the parser's message for a schema it refuses.
 * Run with the source launcher: java -cp '.cache/avro/libs/*' tests/java/AvroSchemaText.java
 */
public class AvroSchemaText {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            try {
                out.append(new Schema.Parser().parse(line).toString());
            } catch (RuntimeException e) {
                out.append("ERROR ").append(String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            out.append('\n');
        }
        System.out.write(out.toString().getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }
}
