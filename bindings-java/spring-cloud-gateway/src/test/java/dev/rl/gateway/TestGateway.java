package dev.rl.gateway;

import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The gateway application of the tests: routes come from properties, and all of rl's beans from
 * {@link RlGatewayAutoConfiguration}, the limiter configured by {@code rl.url} and
 * {@code rl.options} (in the tests, one that stays on Redis however slow this machine is).
 */
@SpringBootApplication
public class TestGateway {}
