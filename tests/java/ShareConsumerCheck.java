/*
 * The Java client 4.3's KafkaShareConsumer (KIP-932), run by
 * tests/integration/test_share_groups.py against Ottla:
 *
 *   java -cp '.cache/kafka-4.3.1/libs/*' tests/java/ShareConsumerCheck.java BOOTSTRAP TOPIC GROUP MODE COUNT
 *
 * It first sets the group's share.auto.offset.reset to earliest through the Admin client
 * (and, in mode hold, share.record.lock.duration.ms to 15000, the shortest Kafka allows).
 * Modes:
 *   accept   two consumers of GROUP, each in its thread, accept what they get until
 *            they got COUNT records between them;
 *   decide   one consumer acknowledges explicitly: a value starting with "release" is
 *            released at its first delivery and accepted at its second, one starting
 *            with "reject" is rejected, anything else accepted; it stops after COUNT
 *            deliveries;
 *   hold     one consumer acquires records and never acknowledges them: it prints them
 *            and waits to be killed.
 * Every delivery is printed as "record consumer=C offset=O delivery=D value=V"; the last
 * line is "done" (accept, decide) once every consumer is closed.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsumerCheck {
    static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], mode = args[3];
        int count = Integer.parseInt(args[4]);
        List<AlterConfigOp> configs = new ArrayList<>();
        configs.add(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
        if (mode.equals("hold")) {
            configs.add(new AlterConfigOp(new ConfigEntry("share.record.lock.duration.ms", "15000"),
                                          AlterConfigOp.OpType.SET));
        }
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), configs))
                 .all().get();
        }
        AtomicInteger seen = new AtomicInteger();
        switch (mode) {
            case "accept" -> {
                List<Thread> threads = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    int id = i;
                    Thread t = new Thread(() -> consume(bootstrap, topic, group, id, false, seen, count));
                    t.start();
                    threads.add(t);
                }
                for (Thread t : threads) t.join();
            }
            case "decide" -> consume(bootstrap, topic, group, 0, true, seen, count);
            case "hold" -> hold(bootstrap, topic, group);
            default -> throw new IllegalArgumentException(mode);
        }
        System.out.println("done");
    }

    static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, boolean explicit) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        return new KafkaShareConsumer<>(props);
    }

    static void print(int id, ConsumerRecord<String, String> r) {
        synchronized (System.out) {
            System.out.println("record consumer=" + id + " offset=" + r.offset() + " delivery="
                               + r.deliveryCount().orElse((short) -1) + " value=" + r.value());
        }
    }

    static void consume(String bootstrap, String topic, String group, int id, boolean decide, AtomicInteger seen,
                        int count) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, decide)) {
            c.subscribe(List.of(topic));
            while (seen.get() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    print(id, r);
                    seen.incrementAndGet();
                    if (decide) {
                        AcknowledgeType type = AcknowledgeType.ACCEPT;
                        if (r.value().startsWith("reject")) type = AcknowledgeType.REJECT;
                        else if (r.value().startsWith("release") && r.deliveryCount().orElse((short) 0) == 1)
                            type = AcknowledgeType.RELEASE;
                        c.acknowledge(r, type);
                    }
                }
                c.commitSync();
            }
        }
    }

    static void hold(String bootstrap, String topic, String group) throws InterruptedException {
        KafkaShareConsumer<String, String> c = consumer(bootstrap, group, true);
        c.subscribe(List.of(topic));
        while (true) {
            var records = c.poll(Duration.ofMillis(200));
            if (!records.isEmpty()) {
                for (ConsumerRecord<String, String> r : records) print(0, r);
                System.out.println("holding");
                System.out.flush();
                Thread.sleep(3_600_000);
            }
        }
    }
}
