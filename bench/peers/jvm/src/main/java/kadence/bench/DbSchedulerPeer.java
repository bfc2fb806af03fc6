package kadence.bench;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.SchedulerClient;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

/**
 * The JVM side of bench/peers/dbscheduler_peer.py: db-scheduler with its JDBC store on
 * PostgreSQL.
 *
 * <pre>
 *   PEER_JDBC_URL=jdbc:postgresql://127.0.0.1:PORT/DB [PEER_JDBC_USER=postgres] [PEER_JDBC_PASSWORD=]
 *   java -jar dbscheduler-peer.jar schedule N DUE_EPOCH_MS   one JSON line: ingest_s and versions
 *   java -jar dbscheduler-peer.jar run THREADS CSV [POLL_MS] runs until SIGTERM; one
 *                                                            "job id,unix start s" line per execution
 *   java -jar dbscheduler-peer.jar sustain THREADS CSV POLL_MS RATE SECONDS START_EPOCH_S [AHEAD_S]
 *       as run, plus a feeder thread: for each second t of [START, START + SECONDS), RATE
 *       one-time instances "i@t" due at t, stored AHEAD_S (default 10) seconds before t
 * </pre>
 *
 * Both modes create db-scheduler's documented PostgreSQL table if it is missing.
 */
public final class DbSchedulerPeer {
  static {
    // before any logger exists: only db-scheduler's warnings and errors reach the log
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
  }

  /** db-scheduler's PostgreSQL DDL (db-scheduler/src/test/resources/postgresql_tables.sql). */
  private static final String[] DDL = {
    """
    create table if not exists scheduled_tasks (
      task_name text not null,
      task_instance text not null,
      task_data bytea,
      execution_time timestamp with time zone not null,
      picked boolean not null,
      picked_by text,
      last_success timestamp with time zone,
      last_failure timestamp with time zone,
      consecutive_failures int,
      last_heartbeat timestamp with time zone,
      version bigint not null,
      priority smallint,
      primary key (task_name, task_instance)
    )""",
    "create index if not exists execution_time_idx on scheduled_tasks (execution_time)",
    "create index if not exists last_heartbeat_idx on scheduled_tasks (last_heartbeat)",
    "create index if not exists priority_execution_time_idx"
        + " on scheduled_tasks (priority desc, execution_time asc)",
  };

  /** Scheduled in one batch statement (one transaction) per this many instances. */
  private static final int BATCH = 1000;

  /** lock-and-fetch: refill when <= 1.0 x threads are queued, up to 4.0 x threads picked. */
  private static final double LOWER_FRACTION = 1.0;

  private static final double UPPER_FRACTION = 4.0;

  private static final Object LOCK = new Object();
  private static Writer out;

  private static final OneTimeTask<Void> JOB =
      Tasks.oneTime("peer-job").execute((instance, context) -> record(instance.getId()));

  private DbSchedulerPeer() {}

  /** The handler: takes the start time first, then appends one flushed line under a lock. */
  private static void record(String job) {
    Instant now = Instant.now();
    String line = String.format("%s,%d.%09d%n", job, now.getEpochSecond(), now.getNano());
    synchronized (LOCK) {
      try {
        out.write(line);
        out.flush();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length >= 3 && args[0].equals("schedule")) {
      schedule(Integer.parseInt(args[1]), Long.parseLong(args[2]));
    } else if (args.length >= 3 && args[0].equals("run")) {
      int pollMs = args.length >= 4 ? Integer.parseInt(args[3]) : 500;
      run(Integer.parseInt(args[1]), Path.of(args[2]), pollMs, null);
    } else if (args.length >= 7 && args[0].equals("sustain")) {
      Feed feed =
          new Feed(
              Integer.parseInt(args[4]),
              Integer.parseInt(args[5]),
              Long.parseLong(args[6]),
              args.length >= 8 ? Integer.parseInt(args[7]) : 10);
      run(Integer.parseInt(args[1]), Path.of(args[2]), Integer.parseInt(args[3]), feed);
    } else {
      System.err.println(
          "usage: DbSchedulerPeer schedule N DUE_EPOCH_MS | run THREADS CSV [POLL_MS]"
              + " | sustain THREADS CSV POLL_MS RATE SECONDS START_EPOCH_S [AHEAD_S]"
              + " (PEER_JDBC_URL, PEER_JDBC_USER, PEER_JDBC_PASSWORD, PEER_POOL from the env)");
      System.exit(2);
    }
  }

  private static HikariDataSource dataSource(int defaultPool) {
    String url = System.getenv("PEER_JDBC_URL");
    if (url == null || url.isEmpty()) {
      throw new IllegalArgumentException("PEER_JDBC_URL is not set");
    }
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setUsername(envOr("PEER_JDBC_USER", "postgres"));
    config.setPassword(envOr("PEER_JDBC_PASSWORD", ""));
    config.setMaximumPoolSize(Integer.parseInt(envOr("PEER_POOL", String.valueOf(defaultPool))));
    config.setPoolName("peer");
    HikariDataSource ds = new HikariDataSource(config);
    try (Connection c = ds.getConnection();
        Statement s = c.createStatement()) {
      for (String ddl : DDL) {
        s.execute(ddl);
      }
    } catch (SQLException e) {
      ds.close();
      throw new IllegalStateException("creating scheduled_tasks failed", e);
    }
    return ds;
  }

  private static String envOr(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  /** N instances of the one-time task, all due at DUE_EPOCH_MS, via scheduleBatch. */
  private static void schedule(int n, long dueEpochMs) throws SQLException {
    Instant due = Instant.ofEpochMilli(dueEpochMs);
    try (HikariDataSource ds = dataSource(2)) {
      SchedulerClient client = SchedulerClient.Builder.create(ds, JOB).build();
      long started = System.nanoTime();
      for (int from = 0; from < n; from += BATCH) {
        List<TaskInstance<?>> batch = new ArrayList<>(BATCH);
        for (int i = from; i < Math.min(n, from + BATCH); i++) {
          batch.add(JOB.instance("j" + i));
        }
        client.scheduleBatch(batch, due);
        System.err.printf("\r  db-scheduler: %d of %d jobs stored", from + batch.size(), n);
        System.err.flush();
      }
      double ingestS = (System.nanoTime() - started) / 1e9;
      System.err.println();
      String postgres;
      try (Connection c = ds.getConnection();
          Statement s = c.createStatement();
          ResultSet rs = s.executeQuery("show server_version")) {
        rs.next();
        postgres = rs.getString(1);
      }
      System.out.printf(
          "{\"ingest_s\": %.6f, \"db_scheduler\": \"%s\", \"postgresql\": \"%s\","
              + " \"java\": \"%s %s\"}%n",
          ingestS,
          dbSchedulerVersion(),
          postgres,
          System.getProperty("java.vm.name"),
          System.getProperty("java.runtime.version"));
    }
  }

  private static String dbSchedulerVersion() {
    String path = "/META-INF/maven/com.github.kagkarlsson/db-scheduler/pom.properties";
    try (InputStream in = DbSchedulerPeer.class.getResourceAsStream(path)) {
      if (in == null) {
        return "unknown";
      }
      Properties props = new Properties();
      props.load(in);
      return props.getProperty("version", "unknown");
    } catch (IOException e) {
      return "unknown";
    }
  }

  /**
   * The open-loop feed of the sustained mode: RATE instances due at each second of the window,
   * each its own one-time execution (a late one delays no other, a missed second is not skipped),
   * stored on the wall clock AHEAD_S before it is due whatever the scheduler is doing.
   */
  record Feed(int rate, int seconds, long startEpochS, int aheadS) {
    Thread start(HikariDataSource ds) {
      SchedulerClient client = SchedulerClient.Builder.create(ds, JOB).build();
      Thread feeder = new Thread(() -> feed(client), "peer-feeder");
      feeder.setDaemon(true);
      feeder.start();
      return feeder;
    }

    private void feed(SchedulerClient client) {
      long mostBehindMs = 0;
      long slowestMs = 0;
      try {
        for (int t = 0; t < seconds; t++) {
          long dueS = startEpochS + t;
          long storeAtMs = (dueS - aheadS) * 1000;
          long waitMs = storeAtMs - System.currentTimeMillis();
          if (waitMs > 0) {
            Thread.sleep(waitMs);
          }
          long began = System.currentTimeMillis();
          mostBehindMs = Math.max(mostBehindMs, began - storeAtMs);
          Instant due = Instant.ofEpochSecond(dueS);
          for (int from = 0; from < rate; from += BATCH) {
            List<TaskInstance<?>> batch = new ArrayList<>(BATCH);
            for (int i = from; i < Math.min(rate, from + BATCH); i++) {
              batch.add(JOB.instance(i + "@" + dueS));
            }
            client.scheduleBatch(batch, due);
          }
          slowestMs = Math.max(slowestMs, System.currentTimeMillis() - began);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      System.out.printf(
          "{\"feeder_most_behind_s\": %.3f, \"feeder_slowest_second_s\": %.3f}%n",
          mostBehindMs / 1e3, slowestMs / 1e3);
      System.out.flush();
    }
  }

  /**
   * One scheduler until SIGTERM (and the feed, when there is one); each execution appends
   * "job,unix start seconds" to csv.
   */
  private static void run(int threads, Path csv, int pollMs, Feed feed) throws Exception {
    out =
        Files.newBufferedWriter(
            csv, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    HikariDataSource ds = dataSource(20);
    Scheduler scheduler =
        Scheduler.create(ds, JOB)
            .threads(threads)
            .pollingInterval(Duration.ofMillis(pollMs))
            .pollUsingLockAndFetch(LOWER_FRACTION, UPPER_FRACTION)
            .shutdownMaxWait(Duration.ofSeconds(10))
            .build();
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  scheduler.stop();
                  ds.close();
                  synchronized (LOCK) {
                    try {
                      out.close();
                    } catch (IOException e) {
                      System.err.println("closing " + csv + ": " + e);
                    }
                  }
                  stopped.countDown();
                }));
    scheduler.start();
    if (feed != null) {
      feed.start(ds);
    }
    System.out.printf(
        "started: %d threads, polling every %d ms, lock-and-fetch(%.1f, %.1f), pool %d%n",
        threads, pollMs, LOWER_FRACTION, UPPER_FRACTION, ds.getMaximumPoolSize());
    System.out.flush();
    stopped.await();
  }
}
