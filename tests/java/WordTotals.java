/*
 * A Kafka Streams 4.3 application with processing.guarantee=exactly_once_v2, run by
 * tests/reference/test_kafka_streams.py against Ottla and against Apache Kafka:
 *
 *   java -cp '.cache/kafka-4.3.1/libs/*' tests/java/WordTotals.java \
 *        BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [DELAY_MS [TRANSACTION_TIMEOUT_MS [GROUP_PROTOCOL]]]
 *
 * Input records carry "word,number" values. The application re-keys every record by its
 * word (selectKey, so Streams writes it through a repartition topic of its own) and keeps
 * a running "count,sum" per word in a state store (backed by a changelog topic Streams
 * creates with its own configs), emitting every update to OUTPUT. Record caching is off,
 * so each input record gives exactly one output record: a lost or doubled record shows in
 * the output as a missing or repeated count.
 *
 * DELAY_MS (default 0) sleeps before each record is added to its word's total (after the
 * repartition) so that a test can kill the broker while the application is in the middle
 * of its input. TRANSACTION_TIMEOUT_MS (default: Streams' own, 10 s) is its producers'
 * transaction.timeout.ms, for a test that keeps the broker down longer than that. GROUP_PROTOCOL
 * (default classic) is Streams' group.protocol: "streams" has the broker's streams group
 * coordinator (KIP-1071) assign the tasks. The program prints "STATE <new state>"
 * at every state change and runs until its stdin closes (or SIGTERM), then closes Streams
 * cleanly and exits 0; it exits 1 if Streams ends in ERROR.
 */

import java.io.IOException;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordTotals {
    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: WordTotals BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [DELAY_MS [TRANSACTION_TIMEOUT_MS [GROUP_PROTOCOL]]]");
            System.exit(2);
        }
        String bootstrap = args[0], applicationId = args[1], input = args[2], output = args[3], stateDir = args[4];
        long delayMs = args.length > 5 ? Long.parseLong(args[5]) : 0;
        String transactionTimeoutMs = args.length > 6 && !args[6].isEmpty() ? args[6] : null;
        String groupProtocol = args.length > 7 ? args[7] : "classic";

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // One output record per input record (no cache folding updates together).
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put("group.protocol", groupProtocol);
        if (groupProtocol.equals("classic")) {
            // A thread fenced while the broker is down cannot leave the group: its old member
            // holds the next rebalance until its session expires (Streams' 45 s by default).
            // (With the streams protocol the session timeout is the broker's to set.)
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        }
        if (transactionTimeoutMs != null) {
            props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), transactionTimeoutMs);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((key, value) -> value.substring(0, value.indexOf(',')))
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .aggregate(
                () -> "0,0",
                (word, value, total) -> {
                    pause(delayMs);
                    long number = Long.parseLong(value.substring(value.indexOf(',') + 1));
                    int comma = total.indexOf(',');
                    long count = Long.parseLong(total.substring(0, comma)) + 1;
                    long sum = Long.parseLong(total.substring(comma + 1)) + number;
                    return count + "," + sum;
                },
                Materialized.<String, String, org.apache.kafka.streams.state.KeyValueStore<org.apache.kafka.common.utils.Bytes, byte[]>>as("word-totals")
                    .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((newState, oldState) -> {
            System.out.println("STATE " + newState);
            System.out.flush();
            if (newState == KafkaStreams.State.ERROR || newState == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(30))));
        Thread stdinWatcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // The test closes stdin to ask for a clean stop.
                }
            } catch (IOException e) {
                // stdin gone: stop as well.
            }
            done.countDown();
        });
        stdinWatcher.setDaemon(true);
        streams.start();
        stdinWatcher.start();
        done.await();
        KafkaStreams.State ended = streams.state();
        streams.close(Duration.ofSeconds(60));
        System.out.println("CLOSED " + ended);
        System.out.flush();
        System.exit(ended == KafkaStreams.State.ERROR ? 1 : 0);
    }

    private static void pause(long delayMs) {
        if (delayMs <= 0) {
            return;
        }
        try {
            Thread.sleep(delayMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
