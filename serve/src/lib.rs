//! `rl serve`: the core behind a network interface, for proxies and for services in any language.
//!
//! Every front end (Envoy's gRPC rate-limit service, the HTTP check endpoint, the reverse proxy)
//! turns its request into one [`decide::CheckRequest`] and answers from one
//! [`decide::CheckResult`] made by [`engine::Engine::check`], so they cannot disagree about what
//! a policy means.

pub mod config;
pub mod decide;
pub mod engine;
pub mod grpc;
pub mod metrics;

pub use engine::Engine;
