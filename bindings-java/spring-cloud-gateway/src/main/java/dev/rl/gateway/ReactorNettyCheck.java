package dev.rl.gateway;

import reactor.netty.http.server.HttpServer;

/**
 * Warns at start-up when the gateway runs on a Reactor Netty that can leave a keep-alive request
 * unread. Before 1.3.8, a request that arrives on a reused HTTP/1.1 connection while the previous
 * request's operations are still terminating is queued, and when that queued request completes
 * synchronously the connection stops reading: the client's next request on it waits until the
 * client gives up and closes (reactor/reactor-netty#4361, fixed in 1.3.8). rl answers from a lease
 * or its denial cache without waiting, so a limited route makes such synchronous completions
 * common: in this module's tests, 1.3.6 left about one request in 40,000 unanswered for the
 * client's whole 10 s timeout, and 1.3.8 none in 775,000.
 */
final class ReactorNettyCheck {
    /** The first Reactor Netty without the lost read. */
    static final int[] FIXED = {1, 3, 8};

    private static final System.Logger LOG = System.getLogger(ReactorNettyCheck.class.getName());

    private ReactorNettyCheck() {}

    /** Reactor Netty's version on the class path, from its jar's manifest (null if unknown). */
    static String runningVersion() {
        Package p = HttpServer.class.getPackage();
        return p == null ? null : p.getImplementationVersion();
    }

    /** Whether {@code version} ("1.3.6", "1.2.18", "1.3.8-SNAPSHOT") predates the fix; unknown: no. */
    static boolean affected(String version) {
        if (version == null) {
            return false;
        }
        String[] parts = version.split("[.-]");
        for (int i = 0; i < FIXED.length; i++) {
            int n;
            try {
                n = i < parts.length ? Integer.parseInt(parts[i]) : 0;
            } catch (NumberFormatException e) {
                return false;
            }
            if (n != FIXED[i]) {
                return n < FIXED[i];
            }
        }
        return false;
    }

    /** Logs one warning if {@code version} is affected; returns whether it did. */
    static boolean warnIfAffected(String version) {
        if (!affected(version)) {
            return false;
        }
        LOG.log(System.Logger.Level.WARNING, "rl: Reactor Netty " + version + " can leave a request on a reused"
                + " HTTP/1.1 connection unread until the client closes it (reactor/reactor-netty#4361), which rl's"
                + " immediate answers (leases, the denial cache) make more likely; use Reactor Netty 1.3.8 or later"
                + " (with Netty 4.2.18 or later), e.g. by managing io.projectreactor.netty:reactor-netty-http and"
                + " reactor-netty-core at 1.3.8 in your build");
        return true;
    }
}
