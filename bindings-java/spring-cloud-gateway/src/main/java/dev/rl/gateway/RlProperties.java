package dev.rl.gateway;

import dev.rl.HeaderStyle;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code rl.*} in application.yml:
 * <pre>
 * rl:
 *   url: redis://127.0.0.1:6379/
 *   policies: "100/m"                 # routes without their own
 *   routes:
 *     orders:
 *       policies: "burst: 10/s; 100/m"
 *       cost: 1
 *   header-style: ietf                # ietf | legacy | both | none
 *   trusted-proxy-header: X-Forwarded-For   # only behind a proxy you trust
 *   options:                          # any limiter option (`rl options` lists them)
 *     leases: auto
 *     lease-ms: 100ms
 * </pre>
 * Policy strings are parsed by the core when first used for a route; {@code options} are read
 * by the core when the limiter is built, so a bad name or value stops the application from
 * starting, naming it.
 */
@ConfigurationProperties("rl")
public class RlProperties {
    /** The limiter's URL (redis://, rediss://, redis+sentinel://, redis+cluster://, memory://). */
    private String url = "redis://127.0.0.1:6379/";
    /** Policies of routes that have none of their own; none by default. */
    private String policies;
    /** Per route id: its policies and cost. */
    private Map<String, Route> routes = new LinkedHashMap<>();
    /** Which rate-limit fields to send. */
    private HeaderStyle headerStyle = HeaderStyle.IETF;
    /** A forwarding header set by a trusted proxy (its last entry is the client); off by default. */
    private String trustedProxyHeader;
    /** Whether each route counts in windows of its own (the key is prefixed by the route id). */
    private boolean perRouteKeys = true;
    /** When the limiter throws: true lets the request pass (logged), false denies it (logged). */
    private boolean failOpen = true;
    /**
     * The limiter's options by name (snake_case, kebab-case or camelCase) as text, e.g.
     * {@code leases: on}, {@code lease-ms: 100ms}; see {@code RateLimiter.Builder#option}.
     */
    private Map<String, String> options = new LinkedHashMap<>();

    /** One route's limits. */
    public static class Route {
        /** A policy string, e.g. {@code "burst: 10/s; 100/m"}. */
        private String policies;
        /** Permits each request takes. */
        private long cost = 1;

        public String getPolicies() {
            return policies;
        }

        public void setPolicies(String policies) {
            this.policies = policies;
        }

        public long getCost() {
            return cost;
        }

        public void setCost(long cost) {
            this.cost = cost;
        }
    }

    public String getUrl() {
        return url;
    }

    public void setUrl(String url) {
        this.url = url;
    }

    public String getPolicies() {
        return policies;
    }

    public void setPolicies(String policies) {
        this.policies = policies;
    }

    public Map<String, Route> getRoutes() {
        return routes;
    }

    public void setRoutes(Map<String, Route> routes) {
        this.routes = routes;
    }

    public HeaderStyle getHeaderStyle() {
        return headerStyle;
    }

    public void setHeaderStyle(HeaderStyle headerStyle) {
        this.headerStyle = headerStyle;
    }

    public String getTrustedProxyHeader() {
        return trustedProxyHeader;
    }

    public void setTrustedProxyHeader(String trustedProxyHeader) {
        this.trustedProxyHeader = trustedProxyHeader;
    }

    public boolean isPerRouteKeys() {
        return perRouteKeys;
    }

    public void setPerRouteKeys(boolean perRouteKeys) {
        this.perRouteKeys = perRouteKeys;
    }

    public Map<String, String> getOptions() {
        return options;
    }

    public void setOptions(Map<String, String> options) {
        this.options = options;
    }

    public boolean isFailOpen() {
        return failOpen;
    }

    public void setFailOpen(boolean failOpen) {
        this.failOpen = failOpen;
    }
}
