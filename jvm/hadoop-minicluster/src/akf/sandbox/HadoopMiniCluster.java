package akf.sandbox;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;

/**
 * HDFS (one NameNode with WebHDFS, one DataNode) and YARN (one ResourceManager, one NodeManager) in one
 * JVM, every port free and on loopback, for the sandbox's tests.
 *
 * <p>Usage: {@code HadoopMiniCluster <work dir> <conf dir> <node memory MB> <node vcores>}. Once both
 * clusters answer, the client configuration is written to {@code <conf dir>/core-site.xml},
 * {@code hdfs-site.xml} and {@code yarn-site.xml} (what a client needs to reach the clusters), then {@code <conf dir>/ready.properties} with the
 * ResourceManager's web address and the NameNode's URIs. The JVM runs until it is terminated; a shutdown
 * hook stops YARN, then HDFS.
 */
public final class HadoopMiniCluster {
  private HadoopMiniCluster() {}

  public static void main(String[] args) throws Exception {
    try {
      run(args);
    } catch (Throwable failure) {
      // The clusters' own non-daemon threads would keep a half-started JVM alive: end it.
      failure.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: HadoopMiniCluster <work dir> <conf dir> <node memory MB> <node vcores>");
      System.exit(2);
    }
    File work = new File(args[0]).getAbsoluteFile();
    File confDir = new File(args[1]).getAbsoluteFile();
    int nodeMemoryMb = Integer.parseInt(args[2]);
    int nodeVcores = Integer.parseInt(args[3]);
    if (!confDir.isDirectory() && !confDir.mkdirs()) {
      throw new IOException("cannot create " + confDir);
    }

    Configuration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", new File(work, "tmp").getPath());
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(work, "dfs").getPath());
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, false);
    // Small, fast and tolerant: one replica, containers limited by what we offer, not by memory checks
    // that kill a JVM container for its virtual size.
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 1);
    conf.setInt(YarnConfiguration.NM_PMEM_MB, nodeMemoryMb);
    conf.setInt(YarnConfiguration.NM_VCORES, nodeVcores);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 64);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, nodeMemoryMb);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    // The disk health checker marks a nearly full disk bad, which leaves the cluster without a node.
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.9f);
    conf.setInt(YarnConfiguration.RM_AM_MAX_ATTEMPTS, 1);

    MiniDFSCluster dfs =
        new MiniDFSCluster.Builder(conf, new File(work, "dfs"))
            .numDataNodes(1)
            .nameNodePort(0)
            .nameNodeHttpPort(0)
            .format(true)
            .build();
    dfs.waitActive();
    conf.set("fs.defaultFS", dfs.getURI().toString());

    // Jersey's Guice filter is global to a JVM: the web app started last serves every web app's REST calls
    // (with the NodeManager's started last, /ws/v1/cluster/* answers 404 "controller for v1 not found"). So
    // once the NodeManager is up, the ResourceManager's web app is started again on a new port, and that
    // port is the one written to the configuration; the NodeManager's own REST API is not used here.
    LateWebAppResourceManager[] rm = new LateWebAppResourceManager[1];
    MiniYARNCluster yarn =
        new MiniYARNCluster("akf-yarn", 1, 1, 1) {
          @Override
          protected ResourceManager createResourceManager() {
            rm[0] = new LateWebAppResourceManager();
            return rm[0];
          }
        };
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  yarn.stop();
                  dfs.shutdown();
                }));
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(60_000)) {
      throw new IllegalStateException("the NodeManager did not register with the ResourceManager in 60 s");
    }

    String rmWebApp = freeLoopbackAddress();
    rm[0].startWebAppAgain(rmWebApp);

    Configuration cluster = yarn.getConfig();
    String webhdfs = "webhdfs://" + conf.get(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY);
    // Only what a client needs: the whole minicluster configuration names test-only classes (e.g. the
    // topology mapping org.apache.hadoop.net.StaticMapping) that Spark's shaded Hadoop client lacks.
    writeAtomically(
        new File(confDir, "core-site.xml"),
        out -> clientConfiguration("fs.defaultFS", dfs.getURI().toString()).writeXml(out));
    writeAtomically(
        new File(confDir, "hdfs-site.xml"),
        out ->
            clientConfiguration(
                    DFSConfigKeys.DFS_REPLICATION_KEY, "1",
                    DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY,
                        conf.get(DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY),
                    "dfs.webhdfs.enabled", "true")
                .writeXml(out));
    writeAtomically(
        new File(confDir, "yarn-site.xml"),
        out ->
            clientConfiguration(
                    YarnConfiguration.RM_ADDRESS, cluster.get(YarnConfiguration.RM_ADDRESS),
                    YarnConfiguration.RM_SCHEDULER_ADDRESS, cluster.get(YarnConfiguration.RM_SCHEDULER_ADDRESS),
                    YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS,
                        cluster.get(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS),
                    YarnConfiguration.RM_ADMIN_ADDRESS, cluster.get(YarnConfiguration.RM_ADMIN_ADDRESS),
                    YarnConfiguration.RM_WEBAPP_ADDRESS, rmWebApp)
                .writeXml(out));
    Configuration client = new Configuration(false);
    client.set(YarnConfiguration.RM_WEBAPP_ADDRESS, rmWebApp);
    client.set(YarnConfiguration.RM_ADDRESS, cluster.get(YarnConfiguration.RM_ADDRESS));
    String ready =
        "rm_webapp_address=" + client.get(YarnConfiguration.RM_WEBAPP_ADDRESS) + "\n"
            + "rm_address=" + client.get(YarnConfiguration.RM_ADDRESS) + "\n"
            + "fs_default_fs=" + dfs.getURI() + "\n"
            + "webhdfs=" + webhdfs + "\n";
    writeAtomically(
        new File(confDir, "ready.properties"), out -> out.write(ready.getBytes(StandardCharsets.UTF_8)));
    System.out.println("READY " + ready.replace('\n', ' '));
    System.out.flush();
    Thread.currentThread().join();
  }

  /**
   * A ResourceManager that can start its web app (UI and REST API) a second time, on another port, so that
   * its Guice injector is the JVM's last one.
   */
  private static final class LateWebAppResourceManager extends ResourceManager {
    void startWebAppAgain(String address) {
      webAppAddress = address;
      startWepApp();
    }
  }

  static Configuration clientConfiguration(String... keysAndValues) {
    Configuration configuration = new Configuration(false);
    for (int i = 0; i < keysAndValues.length; i += 2) {
      configuration.set(keysAndValues[i], keysAndValues[i + 1]);
    }
    return configuration;
  }

  private static String freeLoopbackAddress() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return "localhost:" + socket.getLocalPort();
    }
  }

  interface Writer {
    void write(OutputStream out) throws IOException;
  }

  static void writeAtomically(File target, Writer writer) throws IOException {
    File partial = new File(target.getPath() + ".partial");
    try (OutputStream out = new FileOutputStream(partial)) {
      writer.write(out);
    }
    Files.move(partial.toPath(), target.toPath(), StandardCopyOption.ATOMIC_MOVE);
  }
}
