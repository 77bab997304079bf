package dev.rl;

/**
 * {@code java -jar rl-java.jar}: loads the native library and says which one, for checking an
 * installation. Exits 0 if it loaded.
 */
public final class Info {
    private Info() {}

    public static void main(String[] args) {
        String version = Info.class.getPackage().getImplementationVersion();
        System.out.println("rl-java " + (version == null ? "(dev)" : version));
        System.out.println("platform " + NativeLoader.platform());
        System.out.println("native " + NativeLoader.source());
        try (RateLimiter limiter = RateLimiter.builder("memory://").build()) {
            Decision d = limiter.acquire("rl-java-info", 1, 1000);
            System.out.println("self-check " + (d.allowed() ? "ok" : "FAILED") + " (" + d + ")");
            if (!d.allowed()) {
                System.exit(1);
            }
        }
    }
}
