package dev.rl.gateway;

import dev.rl.RateLimiter;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.gateway.config.GatewayAutoConfiguration;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;

/**
 * The beans a gateway needs to use rl: a {@link RateLimiter} on {@code rl.url} with
 * {@code rl.options} (unless the
 * application has one), {@code rlRateLimiter}, {@code rlKeyResolver} and the {@link RlProblemBodyFilter} of its 429s. Runs before the gateway's
 * own configuration, which makes the {@code RequestRateLimiter} filter only when a RateLimiter and
 * a KeyResolver exist.
 */
@AutoConfiguration(before = GatewayAutoConfiguration.class)
@EnableConfigurationProperties(RlProperties.class)
public class RlGatewayAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RateLimiter rlLimiter(RlProperties properties) {
        RateLimiter.Builder builder = RateLimiter.builder(properties.getUrl());
        properties.getOptions().forEach(builder::option);
        return builder.build();
    }

    @Bean
    @ConditionalOnMissingBean(RlRateLimiter.class)
    public RlRateLimiter rlRateLimiter(RateLimiter rlLimiter, RlProperties properties,
            ConfigurationService configurationService) {
        ReactorNettyCheck.warnIfAffected(ReactorNettyCheck.runningVersion());
        return new RlRateLimiter(rlLimiter, properties, configurationService);
    }

    @Bean
    @ConditionalOnMissingBean
    public RlProblemBodyFilter rlProblemBodyFilter() {
        return new RlProblemBodyFilter();
    }

    @Bean
    @ConditionalOnMissingBean(name = "rlKeyResolver")
    public RlKeyResolver rlKeyResolver(RlProperties properties) {
        return new RlKeyResolver(properties.getTrustedProxyHeader());
    }
}
