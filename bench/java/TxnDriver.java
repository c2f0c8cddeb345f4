// Transactional producer driver for bench/transactions_bench.py: Kafka's Java client sends
// N records of S bytes in transactions of K records and prints what it measured.
//
//   java -cp <kafka jars>:<classes> TxnDriver <bootstrap> <topic> <records> <per-txn>
//        <value-bytes> <explicit-partitions:true|false> <partitions> [<warm-up topic>]
//
// With a warm-up topic, 5 transactions of 1,000 records go there first, untimed, on the same
// producer (connections, the coordinator and the JIT warmed up, as the Python clients get an
// untimed warm-up measurement). The clock runs from the first beginTransaction() of the
// timed part to its last commitTransaction(), as for the other clients. Output, one line:
//   RESULT records=<n> seconds=<s> records_per_s=<r> transactions_per_s=<t>
import java.util.Properties;
import java.util.Random;
import java.util.UUID;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnDriver {
    private TxnDriver() {
    }

    private static void run(KafkaProducer<byte[], byte[]> producer, String topic, int transactions,
                            int perTxn, byte[] value, boolean explicit, int partitions) {
        long sent = 0;
        for (int t = 0; t < transactions; t++) {
            producer.beginTransaction();
            for (int i = 0; i < perTxn; i++) {
                ProducerRecord<byte[], byte[]> record = explicit
                    ? new ProducerRecord<>(topic, (int) (sent % partitions), null, value)
                    : new ProducerRecord<>(topic, value);
                producer.send(record);
                sent++;
            }
            producer.commitTransaction();
        }
    }

    public static void main(String[] args) {
        if (args.length < 7) {
            System.err.println("usage: TxnDriver bootstrap topic records per-txn value-bytes "
                + "explicit partitions [warm-up-topic]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int records = Integer.parseInt(args[2]);
        int perTxn = Integer.parseInt(args[3]);
        byte[] value = new byte[Integer.parseInt(args[4])];
        new Random().nextBytes(value);
        boolean explicit = Boolean.parseBoolean(args[5]);
        int partitions = Integer.parseInt(args[6]);
        String warmTopic = args.length > 7 ? args[7] : null;

        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "bench-java-" + UUID.randomUUID());
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int transactions = Math.max(1, records / perTxn);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            if (warmTopic != null) {
                run(producer, warmTopic, 5, 1000, value, explicit, partitions);
            }
            long started = System.nanoTime();
            run(producer, topic, transactions, perTxn, value, explicit, partitions);
            double seconds = (System.nanoTime() - started) / 1e9;
            long total = (long) transactions * perTxn;
            System.out.printf("RESULT records=%d seconds=%.6f records_per_s=%.1f "
                + "transactions_per_s=%.2f%n", total, seconds, total / seconds,
                transactions / seconds);
        }
    }
}
