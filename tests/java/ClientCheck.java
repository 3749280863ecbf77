import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client 4.3.1 (producer, consumer, Admin) against one broker, each result printed
 * as a JSON line {"check": NAME, ...} for tests/integration/test_java_client.py to assert on,
 * the same program run against Ottla and against Apache Kafka.
 *
 * Usage: java -cp 'libs/*' ClientCheck.java BOOTSTRAP PREFIX
 */
public class ClientCheck {
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String prefix = args[1];
        try {
            run(prefix);
        } catch (Throwable t) {
            emit("failed", "error", t.toString());
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);  // the clients' threads are not waited for
    }

    static void run(String prefix) throws Exception {
        String topic = prefix + "-data";
        String txnId = prefix + "-txn";
        try (Admin admin = Admin.create(props())) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000")))).all().get();
            emit("createTopics", "ok", true);
            emit("createTopicsExisting", "error", errorOf(() -> admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get()));

            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            emit("describeTopics", "partitions", described.partitions().size(), "leader", described.partitions().get(0).leader().id(),
                 "replicas", described.partitions().get(0).replicas().size(), "isr", described.partitions().get(0).isr().size(),
                 "internal", described.isInternal(), "topicIdSet", described.topicId() != null);
            emit("describeTopicsUnknown", "error", errorOf(() -> admin.describeTopics(List.of(prefix + "-none")).allTopicNames().get()));

            DescribeClusterResult cluster = admin.describeCluster();
            emit("describeCluster", "nodes", cluster.nodes().get().size(), "node", cluster.nodes().get().iterator().next().id(),
                 "controller", cluster.controller().get().id(), "clusterIdSet", cluster.clusterId().get() != null);

            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
            emit("describeConfigs", "retention.ms", config.get("retention.ms").value(), "retentionSource", config.get("retention.ms").source().name(),
                 "cleanup.policy", config.get("cleanup.policy").value(), "cleanupSource", config.get("cleanup.policy").source().name(),
                 "segment.bytes", config.get("segment.bytes").value(), "max.message.bytes", config.get("max.message.bytes").value());
            admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND),
                new AlterConfigOp(new ConfigEntry("segment.bytes", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            config = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
            emit("incrementalAlterConfigs", "retention.ms", config.get("retention.ms").value(), "cleanup.policy", config.get("cleanup.policy").value());
            emit("incrementalAlterConfigsInvalid", "error", errorOf(() -> admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get()));
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, "1");
            Config brokerConfig = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
            emit("describeBrokerConfigs", "log.retention.bytes", brokerConfig.get("log.retention.bytes").value(),
                 "log.segment.bytes", brokerConfig.get("log.segment.bytes").value(), "message.max.bytes", brokerConfig.get("message.max.bytes").value());

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            emit("createPartitions", "partitions", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size(),
                 "shrinkError", errorOf(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get()));

            producers(admin, topic, txnId);
            groups(admin, topic, prefix);

            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            Map<String, Object> finalized = new TreeMap<>();
            features.finalizedFeatures().forEach((name, range) -> finalized.put(name, (int) range.maxVersionLevel()));
            emit("describeFeatures", "finalized", finalized);

            admin.deleteTopics(List.of(topic)).all().get();
            emit("deleteTopics", "listed", admin.listTopics().names().get().contains(topic));
        }
    }

    static void producers(Admin admin, String topic, String txnId) throws Exception {
        Properties idempotent = props();
        idempotent.put("enable.idempotence", "true");
        idempotent.put("acks", "all");
        List<Long> offsets = new ArrayList<>();
        // Recent timestamps (within retention.ms, or the broker's retention deletes them).
        long base = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(idempotent, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 6; i++) {
                RecordMetadata sent = producer.send(new ProducerRecord<>(topic, 0, base + i, "k" + i, "v" + i)).get();
                offsets.add(sent.offset());
            }
        }
        emit("idempotentProduce", "offsets", offsets);

        Properties transactional = props();
        transactional.put("transactional.id", txnId);
        KafkaProducer<String, String> txn = new KafkaProducer<>(transactional, new StringSerializer(), new StringSerializer());
        txn.initTransactions();
        txn.beginTransaction();
        for (int i = 0; i < 3; i++) txn.send(new ProducerRecord<>(topic, 1, "c", "committed-" + i));
        txn.commitTransaction();
        txn.beginTransaction();
        for (int i = 0; i < 2; i++) txn.send(new ProducerRecord<>(topic, 1, "a", "aborted-" + i));
        txn.flush();  // written before the abort (unsent batches would be dropped by it)
        txn.abortTransaction();
        txn.beginTransaction();
        txn.send(new ProducerRecord<>(topic, 1, "o", "open")).get();

        TransactionDescription open = admin.describeTransactions(List.of(txnId)).all().get().get(txnId);
        emit("describeTransactions", "state", open.state().name(), "partitions", open.topicPartitions().toString(),
             "timeoutMs", open.transactionTimeoutMs(), "coordinator", open.coordinatorId());
        List<String> listed = new ArrayList<>();
        for (TransactionListing listing : admin.listTransactions().all().get())
            if (listing.transactionalId().equals(txnId)) listed.add(listing.state().name());
        emit("listTransactions", "states", listed);
        TopicPartition txnPartition = new TopicPartition(topic, 1);
        List<Object> producing = new ArrayList<>();
        for (ProducerState state : admin.describeProducers(List.of(txnPartition)).partitionResult(txnPartition).get().activeProducers())
            producing.add(new TreeMap<>(Map.of("lastSequence", state.lastSequence(),
                                               "txnStartOffset", state.currentTransactionStartOffset().orElse(-1L))));
        emit("describeProducers", "producers", producing);
        // Read committed stops at the open transaction's first offset.
        emit("listOffsets", "latestCommitted", listOffset(admin, txnPartition, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED),
             "latestUncommitted", listOffset(admin, txnPartition, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED),
             "earliest", listOffset(admin, txnPartition, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
             "maxTimestamp", listOffset(admin, new TopicPartition(topic, 0), OffsetSpec.maxTimestamp(), IsolationLevel.READ_UNCOMMITTED),
             "forTimestamp", listOffset(admin, new TopicPartition(topic, 0), OffsetSpec.forTimestamp(base + 3), IsolationLevel.READ_UNCOMMITTED));
        emit("readCommitted", "values", read(txnPartition, "read_committed"));
        txn.commitTransaction();
        emit("readCommittedAfterCommit", "values", read(txnPartition, "read_committed"));
        emit("readUncommitted", "values", read(txnPartition, "read_uncommitted"));

        // Another instance with the same transactional id fences the first.
        admin.fenceProducers(List.of(txnId)).all().get();
        emit("fenceProducers", "error", errorOf(() -> {
            txn.beginTransaction();
            txn.send(new ProducerRecord<>(topic, 1, "f", "fenced")).get();
            txn.commitTransaction();
            return null;
        }));
        txn.close(Duration.ofSeconds(5));
        TransactionDescription fenced = admin.describeTransactions(List.of(txnId)).all().get().get(txnId);
        emit("describeTransactionsAfterFence", "state", fenced.state().name());

        Map<TopicPartition, RecordsToDelete> deletion = Map.of(new TopicPartition(topic, 0), RecordsToDelete.beforeOffset(2));
        long lowWatermark = admin.deleteRecords(deletion).lowWatermarks().get(new TopicPartition(topic, 0)).get().lowWatermark();
        emit("deleteRecords", "lowWatermark", lowWatermark,
             "earliest", listOffset(admin, new TopicPartition(topic, 0), OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED));
    }

    static long listOffset(Admin admin, TopicPartition partition, OffsetSpec spec, IsolationLevel isolation) throws Exception {
        ListOffsetsResult result = admin.listOffsets(Map.of(partition, spec), new org.apache.kafka.clients.admin.ListOffsetsOptions(isolation));
        return result.partitionResult(partition).get().offset();
    }

    static List<String> read(TopicPartition partition, String isolation) {
        Properties config = props();
        config.put("isolation.level", isolation);
        config.put("enable.auto.commit", "false");
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.currentTimeMillis() + 20_000;
            while (consumer.position(partition) < end && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) values.add(record.value());
        }
        return values;
    }

    static void groups(Admin admin, String topic, String prefix) throws Exception {
        Map<String, Object> consumed = new TreeMap<>();
        for (String protocol : List.of("classic", "consumer")) {
            String group = prefix + "-" + protocol;
            Properties config = props();
            config.put("group.id", group);
            config.put("group.protocol", protocol);
            config.put("auto.offset.reset", "earliest");
            config.put("enable.auto.commit", "false");
            config.put("isolation.level", "read_committed");
            int count = 0;
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30_000;
                while (count < 8 && System.currentTimeMillis() < deadline) count += consumer.poll(Duration.ofMillis(200)).count();
                consumer.commitSync();
                ConsumerGroupDescription live = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                emit("describeConsumerGroupsLive", "protocol", protocol, "type", live.type().name(), "state", live.groupState().name(),
                     "members", live.members().size(), "assigned", live.members().iterator().next().assignment().topicPartitions().size(),
                     "assignor", live.partitionAssignor());
            }
            consumed.put(protocol, count);
        }
        // 4 from partition 0 (after DeleteRecords), 4 committed on partition 1 (3 + the last transaction's 1)
        emit("groupsConsumed", "counts", consumed);

        Map<String, Object> listed = new TreeMap<>();
        for (GroupListing listing : admin.listGroups().all().get())
            if (listing.groupId().startsWith(prefix))
                listed.put(listing.groupId().substring(prefix.length() + 1), listing.type().map(Enum::name).orElse("?") + "/"
                           + listing.groupState().map(Enum::name).orElse("?"));
        emit("listGroups", "groups", listed);
        for (String protocol : List.of("classic", "consumer")) {
            String group = prefix + "-" + protocol;
            ConsumerGroupDescription empty = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            emit("describeConsumerGroups", "protocol", protocol, "type", empty.type().name(), "state", empty.groupState().name(),
                 "members", empty.members().size());
        }

        String group = prefix + "-classic";
        emit("listConsumerGroupOffsets", "offsets", offsets(admin, group));
        admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(3, "moved"))).all().get();
        admin.deleteConsumerGroupOffsets(group, java.util.Set.of(new TopicPartition(topic, 1))).all().get();
        emit("alteredAndDeletedOffsets", "offsets", offsets(admin, group),
             "metadata", admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(new TopicPartition(topic, 0)).metadata());
        admin.deleteConsumerGroups(List.of(group, prefix + "-consumer")).all().get();
        emit("deleteConsumerGroups", "error", errorOf(() -> admin.describeConsumerGroups(List.of(group)).all().get().get(group).groupState()));
    }

    static Map<String, Object> offsets(Admin admin, String group) throws Exception {
        Map<String, Object> result = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
            .forEach((partition, offset) -> result.put(String.valueOf(partition.partition()), offset.offset()));
        return result;
    }

    interface Call { Object call() throws Exception; }

    /** The simple name of the exception a call ends in, or "none" with its result's text. */
    static String errorOf(Call call) {
        try {
            Object result = call.call();
            return "none:" + result;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    static Properties props() {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    static void emit(String check, Object... pairs) {
        StringBuilder line = new StringBuilder("{\"check\":").append(json(check));
        for (int i = 0; i < pairs.length; i += 2) line.append(",").append(json(pairs[i])).append(":").append(json(pairs[i + 1]));
        System.out.println(line.append("}"));
        System.out.flush();
    }

    static String json(Object value) {
        if (value == null) return "null";
        if (value instanceof Number || value instanceof Boolean) return value.toString();
        if (value instanceof Map) {
            StringBuilder out = new StringBuilder("{");
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                if (out.length() > 1) out.append(",");
                out.append(json(String.valueOf(entry.getKey()))).append(":").append(json(entry.getValue()));
            }
            return out.append("}").toString();
        }
        if (value instanceof Collection) {
            StringBuilder out = new StringBuilder("[");
            for (Object item : (Collection<?>) value) {
                if (out.length() > 1) out.append(",");
                out.append(json(item));
            }
            return out.append("]").toString();
        }
        String text = value.toString().replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
        return "\"" + text + "\"";
    }
}
