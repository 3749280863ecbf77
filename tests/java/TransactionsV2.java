/*
 * The Java client 4.3's transactional producer, run by
 * tests/integration/test_transaction_version_2.py against Ottla and against Apache Kafka:
 *
 *   java -cp '.cache/kafka-4.3.1/libs/*' tests/java/TransactionsV2.java BOOTSTRAP TOPIC TRANSACTIONAL_ID
 *
 * TOPIC must exist with two partitions. The program commits, aborts and commits again,
 * then starts a second producer with the same transactional id, which fences the first,
 * and commits with it. After each step it prints the transaction's state and producer
 * epoch as DescribeTransactions gives them, so the caller sees whether the client runs
 * transaction version 2 (the epoch moves at every commit and abort) or 1 (it moves only
 * at InitProducerId); the state is printed once the markers are written. The epochs are printed relative to the first producer's first one,
 * since brokers allocate producer ids and epochs differently. Finally it prints every
 * value a read_committed consumer reads, partition by partition.
 *
 * Output lines are "key=value"; the program exits 0 when every step ran.
 */

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransactionsV2 {
    private static String bootstrap;
    private static String transactionalId;
    private static long firstProducerId = -1;
    private static int firstEpoch = -1;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String topic = args[1];
        transactionalId = args[2];
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            KafkaProducer<String, String> first = producer();
            first.initTransactions();
            TransactionDescription initial = describe(admin);
            firstProducerId = initial.producerId();
            firstEpoch = initial.producerEpoch();
            report(admin, "init");

            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "k", "commit-1-p0")).get();
            first.send(new ProducerRecord<>(topic, 1, "k", "commit-1-p1")).get();
            first.commitTransaction();
            report(admin, "commit-1");

            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "k", "abort-1-p0")).get();
            first.abortTransaction();
            report(admin, "abort-1");

            // Offsets in the transaction: TxnOffsetCommit v5 with no AddOffsetsToTxn (TV2).
            String group = transactionalId + "-group";
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 1, "k", "commit-2-p1")).get();
            first.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(5)),
                                           new ConsumerGroupMetadata(group));
            first.commitTransaction();
            report(admin, "commit-2");
            OffsetAndMetadata committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .get(new TopicPartition(topic, 0));
            System.out.println("group-offset=" + (committed == null ? "none" : committed.offset()));

            // A second producer with the same transactional id fences the first.
            KafkaProducer<String, String> second = producer();
            second.initTransactions();
            report(admin, "second-init");
            String fenced = "none";
            try {
                first.beginTransaction();
                first.send(new ProducerRecord<>(topic, 0, "k", "zombie-p0")).get();
                first.commitTransaction();
            } catch (Exception exc) {
                Throwable cause = exc instanceof ExecutionException && exc.getCause() != null ? exc.getCause() : exc;
                fenced = cause.getClass().getSimpleName();
            }
            System.out.println("zombie=" + fenced);
            first.close(Duration.ZERO);

            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, "k", "commit-3-p0")).get();
            second.commitTransaction();
            report(admin, "commit-3");
            second.close();
            // The partitions' view: the last marker's epoch, relative to the first epoch
            // (transaction version 2 writes markers at the bumped epoch).
            for (int partition = 0; partition < 2; partition++) {
                TopicPartition tp = new TopicPartition(topic, partition);
                List<String> epochs = new ArrayList<>();
                for (ProducerState state : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                    epochs.add((state.producerId() == firstProducerId ? "" : "other-id:") + (state.producerEpoch() - firstEpoch));
                }
                System.out.println("producers-p" + partition + "=" + String.join(",", epochs));
            }
        }
        for (int partition = 0; partition < 2; partition++) {
            System.out.println("committed-p" + partition + "=" + String.join(",", readCommitted(topic, partition)));
        }
    }

    private static KafkaProducer<String, String> producer() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        return new KafkaProducer<>(props);
    }

    private static TransactionDescription describe(Admin admin) throws Exception {
        return admin.describeTransactions(List.of(transactionalId)).description(transactionalId).get();
    }

    /** The state after `step`; the epoch relative to the first one, and whether the
     * producer id is still the first (a new id at epoch 0 would restart the count). */
    private static void report(Admin admin, String step) throws Exception {
        // A broker answers EndTxn before its markers are written: wait for them, so the
        // state printed is the one the transaction settles in.
        TransactionDescription txn = describe(admin);
        long deadline = System.currentTimeMillis() + 30000;
        while (txn.state().toString().startsWith("Prepare") && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
            txn = describe(admin);
        }
        System.out.println(step + ".state=" + txn.state());
        System.out.println(step + ".epoch=" + (txn.producerEpoch() - firstEpoch));
        System.out.println(step + ".same-producer-id=" + (txn.producerId() == firstProducerId));
    }

    private static List<String> readCommitted(String topic, int partition) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 30000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
            }
        }
        return values;
    }
}
