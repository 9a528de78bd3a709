package akf.sandbox;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system without a process per file operation.
 *
 * <p>Without Hadoop's native library (pyspark ships none), {@link RawLocalFileSystem} runs {@code chmod}
 * for every file and folder it creates and {@code readlink} for every rename through a
 * {@code FileContext} (Spark's checkpoint log): a steady local driver at one batch a second started
 * about 67 processes a second. This one sets permissions and tells symlinks with {@code java.nio}
 * instead, and leaves everything else (and anything unusual: sticky bits, symlinks) to Hadoop's code.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {

  @Override
  public void setPermission(Path path, FsPermission permission) throws IOException {
    String symbolic = permission.toString();
    if (symbolic.length() != 9 || permission.getStickyBit()) {
      super.setPermission(path, permission);
      return;
    }
    Files.setPosixFilePermissions(pathToFile(path).toPath(), PosixFilePermissions.fromString(symbolic));
  }

  @Override
  public FileStatus getFileLinkStatus(Path path) throws IOException {
    if (Files.isSymbolicLink(pathToFile(path).toPath())) {
      return super.getFileLinkStatus(path);
    }
    return getFileStatus(path);
  }
}
