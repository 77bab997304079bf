package dev.rl;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads {@code librl_java} once per class loader:
 * <ol>
 *   <li>the file named by the system property {@code rl.native.path}, if set;</li>
 *   <li>else {@code rl_java} from {@code java.library.path} ({@code System.loadLibrary});</li>
 *   <li>else the copy bundled in this jar at {@code /native/<platform>/<file>} (for example
 *       {@code /native/linux-x86_64/librl_java.so}), extracted to a temporary file and loaded from
 *       there. The file is deleted right after loading where the OS allows it (the mapping stays),
 *       otherwise on exit.</li>
 * </ol>
 */
public final class NativeLoader {
    /** The library's base name: {@code librl_java.so}, {@code librl_java.dylib}, {@code rl_java.dll}. */
    public static final String LIBRARY = "rl_java";

    private static String source;

    private NativeLoader() {}

    /** Loads the library if this class loader has not yet; thread-safe. */
    static synchronized void load() {
        if (source != null) {
            return;
        }
        String explicit = System.getProperty("rl.native.path");
        if (explicit != null && !explicit.isEmpty()) {
            System.load(Path.of(explicit).toAbsolutePath().toString());
            source = "rl.native.path:" + explicit;
            return;
        }
        UnsatisfiedLinkError fromPath;
        try {
            System.loadLibrary(LIBRARY);
            source = "java.library.path";
            return;
        } catch (UnsatisfiedLinkError e) {
            fromPath = e;
        }
        String resource = bundledResource();
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                UnsatisfiedLinkError e = new UnsatisfiedLinkError("rl: no " + System.mapLibraryName(LIBRARY)
                        + " on java.library.path, and this jar bundles none for platform " + platform()
                        + " (looked for " + resource + "); build bindings-java on this platform or set -Drl.native.path");
                e.addSuppressed(fromPath);
                throw e;
            }
            Path tmp = Files.createTempFile("rl_java-", "-" + System.mapLibraryName(LIBRARY));
            try {
                Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
                System.load(tmp.toAbsolutePath().toString());
            } finally {
                if (isWindows()) {
                    tmp.toFile().deleteOnExit(); // a loaded DLL cannot be deleted
                } else {
                    Files.deleteIfExists(tmp);
                }
            }
            source = "bundled:" + resource;
        } catch (IOException e) {
            throw new UncheckedIOException("rl: cannot extract the bundled native library " + resource, e);
        }
    }

    /** Where the library came from: {@code "java.library.path"}, {@code "bundled:/native/..."}, ... */
    public static synchronized String source() {
        Native.ensureLoaded();
        return source;
    }

    /** The resource path of the library bundled for this platform. */
    public static String bundledResource() {
        return "/native/" + platform() + "/" + System.mapLibraryName(LIBRARY);
    }

    /** This JVM's platform folder: {@code linux-x86_64}, {@code linux-aarch64}, {@code macos-aarch64}, ... */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (os.startsWith("linux")) {
            os = "linux";
        } else if (os.startsWith("mac") || os.startsWith("darwin")) {
            os = "macos";
        } else if (os.startsWith("windows")) {
            os = "windows";
        } else {
            os = os.replaceAll("[^a-z0-9]", "");
        }
        switch (arch) {
            case "amd64":
            case "x86_64":
            case "x86-64":
                arch = "x86_64";
                break;
            case "aarch64":
            case "arm64":
                arch = "aarch64";
                break;
            default:
                arch = arch.replaceAll("[^a-z0-9_]", "");
        }
        return os + "-" + arch;
    }

    private static boolean isWindows() {
        return System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("windows");
    }
}
