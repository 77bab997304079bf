//! The tonic service: one `ShouldRateLimit` = one [`Engine::check`].

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::convert;
use crate::engine::Engine;

/// Envoy's `RateLimitService`, answered by an [`Engine`].
#[derive(Clone)]
pub struct RateLimitService {
    engine: Arc<Engine>,
}

impl RateLimitService {
    pub fn new(engine: Arc<Engine>) -> Self {
        RateLimitService { engine }
    }
}

#[tonic::async_trait]
impl rate_limit_service_server::RateLimitService for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let question = convert::check_request(request.into_inner());
        match self.engine.check(&question).await {
            Ok(result) => Ok(Response::new(convert::response(result))),
            Err(err) => {
                tracing::warn!(domain = %question.domain, error = %err, "ShouldRateLimit failed");
                Err(convert::error_status(&err))
            }
        }
    }
}
