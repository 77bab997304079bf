package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Where the native library comes from, and that it works from any class loader. */
class LoaderTest {
    static final Path CLASSES = Path.of(System.getProperty("rl.test.classes", "target/classes"));

    @Test
    void bundledLibraryIsInThePlatformFolder() {
        assertEquals("linux-x86_64".equals(NativeLoader.platform()) ? "/native/linux-x86_64/librl_java.so"
                : NativeLoader.bundledResource(), NativeLoader.bundledResource());
        assertTrue(Files.isRegularFile(CLASSES.resolve(NativeLoader.bundledResource().substring(1))));
        // This JVM has no java.library.path entry for it: it was extracted from the resources.
        assertEquals("bundled:" + NativeLoader.bundledResource(), NativeLoader.source());
    }

    @Test
    void platformNamesFollowOsNameAndArch() {
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "amd64"));
        assertEquals("linux-aarch64", NativeLoader.platform("Linux", "aarch64"));
        assertEquals("macos-aarch64", NativeLoader.platform("Mac OS X", "aarch64"));
        assertEquals("windows-x86_64", NativeLoader.platform("Windows 11", "amd64"));
        assertEquals("freebsd-riscv64", NativeLoader.platform("FreeBSD", "riscv64"));
        assertEquals("/native/macos-aarch64/librl_java.dylib", NativeLoader.bundledResource("macos-aarch64"));
        assertEquals("/native/windows-x86_64/rl_java.dll", NativeLoader.bundledResource("windows-x86_64"));
    }

    /** On a platform the jar has no library for, the error names it, what the jar has, and the ways out. */
    @Test
    void unsupportedPlatformSaysWhichAndWhatToDo() {
        String platform = NativeLoader.platform("FreeBSD", "riscv64");
        UnsatisfiedLinkError e =
                assertThrows(UnsatisfiedLinkError.class, () -> NativeLoader.loadBundled(platform, null));
        String m = e.getMessage();
        assertTrue(m.contains("this platform, freebsd-riscv64 "), m);
        assertTrue(m.contains("bundles one for " + NativeLoader.platform()), m);
        assertTrue(m.contains("cargo build --release -p rl-java"), m);
        assertTrue(m.contains("-Drl.native.path=/path/to/librl_java.so"), m);
        assertTrue(m.contains("java.library.path"), m);
    }

    @Test
    void javaLibraryPathIsTriedFirst() throws Exception {
        Path dir = CLASSES.resolve(NativeLoader.bundledResource().substring(1)).getParent();
        String out = java("-Djava.library.path=" + dir, "-cp", CLASSES.toString(), "dev.rl.Info");
        assertTrue(out.contains("native java.library.path"), out);
        assertTrue(out.contains("self-check ok"), out);
        String bundled = java("-cp", CLASSES.toString(), "dev.rl.Info");
        assertTrue(bundled.contains("native bundled:/native/"), bundled);
    }

    /**
     * Two isolated class loaders (as in an application server, or Maven's exec:java) each load
     * the library (their own extracted copy) and complete async calls from the runtime: the
     * native side reaches each loader's classes without FindClass on a runtime thread.
     */
    @Test
    void worksFromIsolatedClassLoaders() throws Exception {
        List<URLClassLoader> loaders = new ArrayList<>();
        try {
            for (int i = 0; i < 2; i++) {
                URLClassLoader loader = new URLClassLoader(new URL[] {CLASSES.toUri().toURL()},
                        ClassLoader.getPlatformClassLoader());
                loaders.add(loader);
                Class<?> rl = loader.loadClass("dev.rl.RateLimiter");
                assertNotSame(RateLimiter.class, rl);
                Object limiter = rl.getMethod("open", String.class).invoke(null, TestSupport.redisUrl());
                try {
                    CompletableFuture<?> f = (CompletableFuture<?>) rl
                            .getMethod("acquireAsync", String.class, long.class, long.class)
                            .invoke(limiter, TestSupport.key("loader"), 1L, 1000L);
                    Object decision = f.get(5, TimeUnit.SECONDS);
                    assertEquals("dev.rl.Decision", decision.getClass().getName());
                    assertEquals(loader, decision.getClass().getClassLoader());
                    assertEquals(Boolean.TRUE, decision.getClass().getMethod("allowed").invoke(decision));
                    String source = (String) loader.loadClass("dev.rl.NativeLoader").getMethod("source").invoke(null);
                    assertTrue(source.startsWith("bundled:"), source);
                } finally {
                    rl.getMethod("close").invoke(limiter);
                }
            }
        } finally {
            for (URLClassLoader l : loaders) {
                l.close();
            }
        }
    }

    private static String java(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "java did not finish");
        assertEquals(0, p.exitValue(), out);
        return out;
    }
}
