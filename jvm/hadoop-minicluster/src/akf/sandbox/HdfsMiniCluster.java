package akf.sandbox;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * HDFS alone (one NameNode with WebHDFS, one DataNode) in one JVM on loopback, for the storage tests: no
 * YARN, so it starts faster and holds less memory than {@link HadoopMiniCluster}.
 *
 * <p>Usage: {@code HdfsMiniCluster <work dir> <conf dir> <namenode rpc port> <namenode http port> <format>}.
 * With {@code format} "true" the storage under {@code <work dir>/dfs} is formatted (a new, empty file
 * system); with "false" the NameNode loads the image and edits already there and the DataNode its blocks,
 * so a cluster stopped and started again on the same folder and ports keeps its files and its URI. Once the
 * NameNode has left safe mode with its DataNode registered, {@code <conf dir>/core-site.xml} and
 * {@code hdfs-site.xml} (what a client needs) and then {@code <conf dir>/ready.properties} (the URIs) are
 * written. The JVM runs until it is terminated; a shutdown hook stops the cluster cleanly.
 */
public final class HdfsMiniCluster {
  private HdfsMiniCluster() {}

  public static void main(String[] args) throws Exception {
    try {
      run(args);
    } catch (Throwable failure) {
      failure.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println(
          "usage: HdfsMiniCluster <work dir> <conf dir> <namenode rpc port> <namenode http port> <format>");
      System.exit(2);
    }
    File work = new File(args[0]).getAbsoluteFile();
    File confDir = new File(args[1]).getAbsoluteFile();
    int rpcPort = Integer.parseInt(args[2]);
    int httpPort = Integer.parseInt(args[3]);
    boolean format = Boolean.parseBoolean(args[4]);
    if (!confDir.isDirectory() && !confDir.mkdirs()) {
      throw new IOException("cannot create " + confDir);
    }

    Configuration conf = new HdfsConfiguration();
    conf.set("hadoop.tmp.dir", new File(work, "tmp").getPath());
    File base = new File(work, "dfs");
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getPath());
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, false);
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 1);
    // Append and hflush on a one-DataNode cluster: never try to replace a DataNode in the write pipeline.
    conf.set("dfs.client.block.write.replace-datanode-on-failure.policy", "NEVER");

    MiniDFSCluster dfs =
        new MiniDFSCluster.Builder(conf, base)
            .numDataNodes(1)
            .nameNodePort(rpcPort)
            .nameNodeHttpPort(httpPort)
            .format(format)
            .build();
    Runtime.getRuntime().addShutdownHook(new Thread(dfs::shutdown));
    dfs.waitActive();
    dfs.waitClusterUp();

    // The NameNode listens on 127.0.0.1 only; the URIs say so (MiniDFSCluster's own say "localhost").
    String fsUri = "hdfs://127.0.0.1:" + dfs.getNameNodePort();
    String http = "127.0.0.1:" + dfs.getNameNode().getHttpAddress().getPort();
    HadoopMiniCluster.writeAtomically(
        new File(confDir, "core-site.xml"),
        out -> HadoopMiniCluster.clientConfiguration("fs.defaultFS", fsUri).writeXml(out));
    HadoopMiniCluster.writeAtomically(
        new File(confDir, "hdfs-site.xml"),
        out ->
            HadoopMiniCluster.clientConfiguration(
                    DFSConfigKeys.DFS_REPLICATION_KEY, "1",
                    DFSConfigKeys.DFS_NAMENODE_HTTP_ADDRESS_KEY, http,
                    "dfs.webhdfs.enabled", "true",
                    "dfs.client.block.write.replace-datanode-on-failure.policy", "NEVER")
                .writeXml(out));
    String ready = "fs_default_fs=" + fsUri + "\n" + "webhdfs=webhdfs://" + http + "\n";
    HadoopMiniCluster.writeAtomically(
        new File(confDir, "ready.properties"), out -> out.write(ready.getBytes(StandardCharsets.UTF_8)));
    System.out.println("READY " + ready.replace('\n', ' '));
    System.out.flush();
    Thread.currentThread().join();
  }
}
