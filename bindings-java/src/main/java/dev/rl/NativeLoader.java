package dev.rl;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
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

    /** Platform folders a jar may bundle (the pom's profiles); one jar holds those it was built with. */
    static final List<String> KNOWN_PLATFORMS =
            List.of("linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-aarch64", "windows-x86_64");

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
        source = loadBundled(platform(), fromPath);
    }

    /**
     * Extracts and loads the copy bundled for {@code platform}, or fails with a message naming the
     * platform, the platforms this jar does bundle, and the two ways out. Package-private so a test
     * can ask for a platform the jar lacks without faking {@code os.name} for the whole JVM.
     */
    static String loadBundled(String platform, UnsatisfiedLinkError fromPath) {
        String resource = bundledResource(platform);
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                UnsatisfiedLinkError e = new UnsatisfiedLinkError(unsupportedMessage(platform));
                if (fromPath != null) {
                    e.addSuppressed(fromPath);
                }
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
            return "bundled:" + resource;
        } catch (IOException e) {
            throw new UncheckedIOException("rl: cannot extract the bundled native library " + resource, e);
        }
    }

    /** The error text for a platform this jar bundles no library for. */
    static String unsupportedMessage(String platform) {
        List<String> bundled = new ArrayList<>();
        for (String p : KNOWN_PLATFORMS) {
            if (NativeLoader.class.getResource(bundledResource(p)) != null) {
                bundled.add(p);
            }
        }
        return "rl: this platform, " + platform + " (from os.name and os.arch), has no native library in this"
                + " rl-java jar, which bundles one for "
                + (bundled.isEmpty() ? "no platform" : String.join(", ", bundled))
                + ". To run here, build it from the rl sources on this platform"
                + " (cargo build --release -p rl-java gives target/release/"
                + libraryFile(platform) + ") and pass -Drl.native.path=/path/to/" + libraryFile(platform)
                + ", or put its directory on java.library.path.";
    }

    /** Where the library came from: {@code "java.library.path"}, {@code "bundled:/native/..."}, ... */
    public static synchronized String source() {
        Native.ensureLoaded();
        return source;
    }

    /** The resource path of the library bundled for this platform. */
    public static String bundledResource() {
        return bundledResource(platform());
    }

    static String bundledResource(String platform) {
        return "/native/" + platform + "/" + libraryFile(platform);
    }

    /** The library's file name on {@code platform} (named by {@link #platform()}). */
    static String libraryFile(String platform) {
        if (platform.startsWith("windows-")) {
            return LIBRARY + ".dll";
        }
        return "lib" + LIBRARY + (platform.startsWith("macos-") ? ".dylib" : ".so");
    }

    /** This JVM's platform folder: {@code linux-x86_64}, {@code linux-aarch64}, {@code macos-aarch64}, ... */
    public static String platform() {
        return platform(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));
    }

    /** The platform folder for an {@code os.name} and {@code os.arch} pair. */
    static String platform(String osName, String osArch) {
        String os = osName.toLowerCase(Locale.ROOT);
        String arch = osArch.toLowerCase(Locale.ROOT);
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
