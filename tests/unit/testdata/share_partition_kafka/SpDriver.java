// Drives Apache Kafka 4.4's own SharePartition (kafka.server.share, hence the package) for
// tests/unit/test_share_partition_kafka.py: generate.py runs it and records its answers in
// kafka_4_4.json. Args: max in-flight records, delivery count limit, lock duration (ms).
// Commands on stdin, one answer line each:
//   acquire <member> <first> <last> <now> <maxRecords> <fetchOffset> <batchSize>
//       (the log returned first..last, one record per batch)
//   ack <member> <now> <first>:<last>:<type,type...>;...     expire <now>     leave <member>
//   state   ("spso=.. next=.. <offset>=<STATE>/<deliveryCount>/<member if ACQUIRED> ...")
// The timer is manual: `expire <now>` runs the acquisition-lock tasks due by then.
package kafka.server.share;

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.ArrayList;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Comparator;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.internals.ShareAcquireMode;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.record.internal.*;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfigProvider;
import org.apache.kafka.server.share.acknowledge.ShareAcknowledgementBatch;
import org.apache.kafka.server.share.dlq.NoOpShareGroupDLQManager;
import org.apache.kafka.server.share.fetch.*;
import org.apache.kafka.server.share.metrics.SharePartitionMetrics;
import org.apache.kafka.server.share.persister.NoOpStatePersister;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.storage.log.FetchPartitionData;
import org.apache.kafka.server.util.timer.Timer;
import org.apache.kafka.server.util.timer.TimerTask;
import org.apache.kafka.server.util.timer.TimerTaskEntry;
import org.apache.kafka.common.compress.Compression;

public class SpDriver {
    static long now = 0;
    static final List<TimerTaskEntry> tasks = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        int maxInFlight = Integer.parseInt(args[0]), limit = Integer.parseInt(args[1]), lock = Integer.parseInt(args[2]);
        Time time = new Time() {
            public long milliseconds() { return now; }
            public long nanoseconds() { return now * 1_000_000L; }
            public void sleep(long ms) { now += ms; }
        };
        Timer timer = new Timer() {
            public void add(TimerTask t) { tasks.add(new TimerTaskEntry(t, now + t.delayMs)); }
            public boolean advanceClock(long ms) { return false; }
            public int size() { return tasks.size(); }
            public void close() {}
        };
        TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), 0, "t");
        SharePartition sp = new SharePartition("g", tp, 0, maxInFlight, limit, lock, timer, time, new NoOpStatePersister(),
            null, k -> {}, new ShareGroupConfigProvider(null) {
                public int recordLockDurationMsOrDefault(String g, int d) { return d; }
                public int deliveryCountLimitOrDefault(String g, int d) { return d; }
                public int partitionMaxRecordLocksOrDefault(String g, int d) { return d; }
                public boolean isRenewAcknowledgeEnabled(String g) { return true; }
                public Optional<String> errorsDLQTopicName(String g) { return Optional.empty(); }
            }, SharePartition.SharePartitionState.ACTIVE,
            null, new SharePartitionMetrics("g", "t", 0), () -> false, new NoOpShareGroupDLQManager());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.split(" ");
            try {
                switch (a[0]) {
                    case "acquire": {
                        String member = a[1]; long first = Long.parseLong(a[2]), last = Long.parseLong(a[3]);
                        now = Long.parseLong(a[4]); int max = Integer.parseInt(a[5]); long fetchOffset = Long.parseLong(a[6]);
                        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                        List<MemoryRecords> parts = new ArrayList<>();
                        int size = 0;
                        for (long o = first; o <= last; o++) {
                            MemoryRecords r = MemoryRecords.withRecords(o, Compression.NONE, new SimpleRecord(("v" + o).getBytes()));
                            parts.add(r); size += r.sizeInBytes();
                        }
                        java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate(size);
                        for (MemoryRecords r : parts) buf.put(r.buffer().duplicate());
                        buf.flip();
                        MemoryRecords records = MemoryRecords.readableRecords(buf);
                        FetchPartitionData data = new FetchPartitionData(org.apache.kafka.common.protocol.Errors.NONE, last + 1, 0, records,
                            Optional.empty(), OptionalLong.empty(), Optional.empty(), OptionalInt.empty(), false);
                        ShareAcquiredRecords got = sp.acquire(member, ShareAcquireMode.BATCH_OPTIMIZED, Integer.parseInt(a[7]), max, fetchOffset, data, FetchIsolation.HIGH_WATERMARK);
                        StringBuilder sb = new StringBuilder("acquired");
                        for (var r : got.acquiredRecords()) for (long o = r.firstOffset(); o <= r.lastOffset(); o++) sb.append(" ").append(o).append(":").append(r.deliveryCount());
                        out.println(sb);
                        break;
                    }
                    case "ack": {
                        String member = a[1]; now = Long.parseLong(a[2]);
                        List<ShareAcknowledgementBatch> batches = new ArrayList<>();
                        for (String b : a[3].split(";")) {
                            String[] f = b.split(":");
                            List<Byte> types = new ArrayList<>();
                            for (String t : f[2].split(",")) types.add(Byte.parseByte(t));
                            batches.add(new ShareAcknowledgementBatch(Long.parseLong(f[0]), Long.parseLong(f[1]), types));
                        }
                        CompletableFuture<Void> fut = sp.acknowledge(member, batches);
                        try { fut.get(); out.println("ok"); }
                        catch (Exception e) { out.println("error " + e.getCause().getClass().getSimpleName()); }
                        break;
                    }
                    case "expire": {
                        now = Long.parseLong(a[1]);
                        List<TimerTaskEntry> due = new ArrayList<>();
                        for (TimerTaskEntry e : tasks) if (e.expirationMs <= now) due.add(e);
                        tasks.removeAll(due);
                        due.sort(Comparator.comparingLong(e -> e.expirationMs));
                        for (TimerTaskEntry e : due) if (!e.cancelled()) e.timerTask.run();
                        tasks.removeIf(TimerTaskEntry::cancelled);
                        out.println("ok");
                        break;
                    }
                    case "leave": {
                        sp.releaseAcquiredRecords(a[1]).get();
                        out.println("ok");
                        break;
                    }
                    case "state": {
                        StringBuilder sb = new StringBuilder("spso=" + sp.startOffset() + " next=" + sp.nextFetchOffset());
                        for (var e : sp.cachedState().entrySet()) {
                            InFlightBatch b = e.getValue();
                            if (b.offsetState() == null) {
                                for (long o = b.firstOffset(); o <= b.lastOffset(); o++)
                                    if (o >= sp.startOffset()) sb.append(" ").append(o).append("=").append(b.batchState()).append("/").append(b.batchDeliveryCount()).append("/").append(b.batchState() == RecordState.ACQUIRED ? b.batchMemberId() : "");
                            } else {
                                for (var s : b.offsetState().entrySet())
                                    if (s.getKey() >= sp.startOffset()) sb.append(" ").append(s.getKey()).append("=").append(s.getValue().state()).append("/").append(s.getValue().deliveryCount()).append("/").append(s.getValue().state() == RecordState.ACQUIRED ? s.getValue().memberId() : "");
                            }
                        }
                        out.println(sb);
                        break;
                    }
                    default: out.println("unknown " + a[0]);
                }
            } catch (Exception e) {
                out.println("exception " + e);
            }
        }
    }
}
