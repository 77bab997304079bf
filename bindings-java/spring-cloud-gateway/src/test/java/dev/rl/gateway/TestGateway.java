package dev.rl.gateway;

import dev.rl.RateLimiter;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;

/**
 * The gateway application of the tests: routes come from properties; rl's beans from
 * {@link RlGatewayAutoConfiguration}, except the limiter, replaced (as an application may) by one
 * that stays on Redis however slow this machine is.
 */
@SpringBootApplication
public class TestGateway {
    @Bean(destroyMethod = "close")
    RateLimiter rlLimiter(@Value("${rl.url}") String url) {
        return RateLimiter.builder(url).degradeRtt(Duration.ofSeconds(60)).build();
    }
}
