// Kafka's Java client for bench/producer_bench.py and bench/consumer_bench.py, measured as the
// Python workers measure themselves (bench/throughput_rounds.py): start-up from constructing
// the client to the first record acknowledged (producer) or delivered (consumer), steady
// state from then to the last record, and the process's CPU time over the steady state.
//
//   java -cp <kafka jars>:<classes> ThroughputDriver produce <bootstrap> <topic> <records>
//        <value-bytes> <acks> <compression> <linger-ms> <batch-bytes, 0: Java's default>
//   java -cp <kafka jars>:<classes> ThroughputDriver consume <bootstrap> <topic> <records>
//        <partitions> <group id, or - to assign every partition>
//
// The client keeps Java's defaults (what its users run) beyond the settings named here. The
// producer sends one record and waits for it (the start-up), then <records> more, keyless,
// and flushes. The consumer reads from the earliest offset until <records> have arrived.
// Output, one line:
//   RESULT records=<steady records> startup_s=<s> steady_s=<s> cpu_s=<s>
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ThroughputDriver {
    private static final long IDLE_LIMIT_NS = 60_000_000_000L;  // no record for 60 s: fail

    private ThroughputDriver() {
    }

    /** CPU time of this whole JVM (every thread: the client's I/O thread, JIT, GC), in ns. */
    private static long processCpuNs() {
        return ((com.sun.management.OperatingSystemMXBean)
                ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    private static void result(long records, long start, long first, long last, long cpuFirst,
                               long cpuLast) {
        System.out.printf("RESULT records=%d startup_s=%.6f steady_s=%.6f cpu_s=%.6f%n", records,
                          (first - start) / 1e9, (last - first) / 1e9, (cpuLast - cpuFirst) / 1e9);
    }

    private static void produce(String[] a) throws Exception {
        String bootstrap = a[1];
        String topic = a[2];
        int records = Integer.parseInt(a[3]);
        byte[] value = new byte[Integer.parseInt(a[4])];
        Arrays.fill(value, (byte) 'x');
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, a[5]);
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a[6]);
        props.put(ProducerConfig.LINGER_MS_CONFIG, a[7]);
        if (Integer.parseInt(a[8]) > 0) {
            props.put(ProducerConfig.BATCH_SIZE_CONFIG, a[8]);
        }
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.send(new ProducerRecord<>(topic, value)).get();
            long first = System.nanoTime();
            long cpuFirst = processCpuNs();
            AtomicReference<Exception> failure = new AtomicReference<>();
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, value), (metadata, error) -> {
                    if (error != null) {
                        failure.compareAndSet(null, error);
                    }
                });
            }
            producer.flush();
            long last = System.nanoTime();
            long cpuLast = processCpuNs();
            if (failure.get() != null) {
                throw failure.get();
            }
            result(records, start, first, last, cpuFirst, cpuLast);
        }
    }

    private static void consume(String[] a) {
        String topic = a[2];
        int records = Integer.parseInt(a[3]);
        int partitions = Integer.parseInt(a[4]);
        String group = a[5];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a[1]);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (!group.equals("-")) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        long start = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                 props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (group.equals("-")) {
                List<TopicPartition> all = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    all.add(new TopicPartition(topic, p));
                }
                consumer.assign(all);
            } else {
                consumer.subscribe(List.of(topic));
            }
            long seen = 0;
            long firstBatch = 0;
            long first = 0;
            long cpuFirst = 0;
            long lastProgress = System.nanoTime();
            while (seen < records) {
                int n = consumer.poll(Duration.ofMillis(1000)).count();
                long now = System.nanoTime();
                if (n == 0) {
                    if (now - lastProgress > IDLE_LIMIT_NS) {
                        throw new IllegalStateException("no record for 60 s after " + seen);
                    }
                    continue;
                }
                lastProgress = now;
                if (seen == 0) {
                    first = now;
                    cpuFirst = processCpuNs();
                    firstBatch = n;
                }
                seen += n;
            }
            long last = System.nanoTime();
            result(seen - firstBatch, start, first, last, cpuFirst, processCpuNs());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 9 && args[0].equals("produce")) {
            produce(args);
        } else if (args.length == 6 && args[0].equals("consume")) {
            consume(args);
        } else {
            System.err.println("usage: see the comment at the top of ThroughputDriver.java");
            System.exit(2);
        }
    }
}
