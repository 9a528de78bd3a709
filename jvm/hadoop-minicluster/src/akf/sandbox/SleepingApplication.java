package akf.sandbox;

import java.io.File;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationSubmissionContext;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.YarnClientApplication;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * A plain JVM YARN application for the tests: its application master registers with the ResourceManager
 * (so the application is RUNNING), heartbeats, and sleeps until killed or until its time is up.
 *
 * <p>{@code SleepingApplication submit <name> <seconds>} submits it and prints the application id;
 * {@code SleepingApplication am <seconds>} is the application master's own command. The client's class
 * path (the minicluster jars and the configuration folder) is the master's class path too: this only works
 * where the NodeManager runs on the same machine, as in the sandbox.
 */
public final class SleepingApplication {
  private SleepingApplication() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 3 && args[0].equals("submit")) {
      System.out.println(submit(args[1], Integer.parseInt(args[2])));
    } else if (args.length == 2 && args[0].equals("am")) {
      runApplicationMaster(Integer.parseInt(args[1]));
    } else {
      System.err.println("usage: SleepingApplication submit <name> <seconds> | am <seconds>");
      System.exit(2);
    }
  }

  private static ApplicationId submit(String name, int seconds) throws Exception {
    YarnClient client = YarnClient.createYarnClient();
    client.init(new YarnConfiguration());
    client.start();
    try {
      YarnClientApplication app = client.createApplication();
      ApplicationSubmissionContext context = app.getApplicationSubmissionContext();
      context.setApplicationName(name);
      context.setApplicationType("AKF-SLEEP");
      context.setMaxAppAttempts(1);
      context.setResource(Resource.newInstance(128, 1));
      Map<String, String> env = new HashMap<>();
      env.put("CLASSPATH", System.getProperty("java.class.path"));
      env.put("JAVA_HOME", System.getProperty("java.home"));
      String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
      List<String> command =
          Collections.singletonList(
              java
                  + " -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "
                  + SleepingApplication.class.getName()
                  + " am "
                  + seconds
                  + " 1>"
                  + ApplicationConstants.LOG_DIR_EXPANSION_VAR
                  + "/stdout 2>"
                  + ApplicationConstants.LOG_DIR_EXPANSION_VAR
                  + "/stderr");
      context.setAMContainerSpec(
          ContainerLaunchContext.newInstance(
              Collections.emptyMap(), env, command, null, null, null));
      return client.submitApplication(context);
    } finally {
      client.stop();
    }
  }

  private static void runApplicationMaster(int seconds) throws Exception {
    AMRMClient<AMRMClient.ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(new YarnConfiguration());
    rm.start();
    rm.registerApplicationMaster("", 0, "");
    long end = System.currentTimeMillis() + seconds * 1000L;
    while (System.currentTimeMillis() < end) {
      rm.allocate(0f);
      Thread.sleep(1000);
    }
    rm.unregisterApplicationMaster(FinalApplicationStatus.SUCCEEDED, "slept " + seconds + " s", "");
    rm.stop();
  }
}
