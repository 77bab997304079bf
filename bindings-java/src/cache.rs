//! Classes and method ids native code calls, looked up once by `Native.init`: on a Java thread,
//! where `FindClass` uses the class loader that loaded `dev.rl.Native` (on a runtime thread it
//! would use the system loader and miss classes loaded by an application or plugin loader).

use std::sync::OnceLock;

use jni::objects::{GlobalRef, JClass, JMethodID, JStaticMethodID};
use jni::{JNIEnv, JavaVM};

use rl_core::{StatsKind, STATS_FIELDS};

use crate::error::Failure;

pub struct Cache {
    pub vm: JavaVM,
    /// `dev.rl.Native`.
    pub native: GlobalRef,
    /// `static Decision decision(boolean, long, long, long, long, int, long)`
    pub decision: JStaticMethodID,
    /// `static CompositeDecision composite(boolean, long, int, long, Object[])`
    pub composite: JStaticMethodID,
    /// `dev.rl.Stats`, a record whose components are `STATS_FIELDS` in order (generated).
    pub stats: GlobalRef,
    /// Its canonical constructor, see [`stats_signature`].
    pub stats_new: JMethodID,
    /// `static RuntimeException error(int, String, long, long, long, long)`
    pub error: JStaticMethodID,
    /// `static void complete(CompletableFuture, Object)`
    pub complete: JStaticMethodID,
    /// `static void fail(CompletableFuture, Throwable)`
    pub fail: JStaticMethodID,
    /// `static void threadAttached(String)`
    pub thread_attached: JStaticMethodID,
    /// `java.lang.Object` and `java.lang.String`, for arrays of them: `NewObjectArray` by name
    /// looks the class up (`FindClass`) on every call, which showed in a gateway's profile.
    pub object_class: GlobalRef,
    pub string_class: GlobalRef,
}

static CACHE: OnceLock<Cache> = OnceLock::new();

pub fn cache() -> Result<&'static Cache, Failure> {
    CACHE
        .get()
        .ok_or_else(|| Failure::Internal("dev.rl.Native.init was not called".into()))
}

/// The cache, if `Native.init` ran (for threads that cannot report a failure).
pub fn get() -> Option<&'static Cache> {
    CACHE.get()
}

/// The JNI type of each stats field's Java component: `long` for counts, `String` otherwise.
pub fn stats_signature() -> String {
    let fields: String = STATS_FIELDS
        .iter()
        .map(|f| match f.kind {
            StatsKind::Count => "J",
            StatsKind::Mode | StatsKind::Text => "Ljava/lang/String;",
        })
        .collect();
    format!("({fields})V")
}

/// Fills the cache (`Native.init`); a second call does nothing.
pub fn init(env: &mut JNIEnv, class: &JClass) -> Result<(), Failure> {
    if CACHE.get().is_some() {
        return Ok(());
    }
    let stats = env.find_class("dev/rl/Stats")?;
    let object_class = env.find_class("java/lang/Object")?;
    let string_class = env.find_class("java/lang/String")?;
    let stats_new = env.get_method_id(&stats, "<init>", stats_signature())?;
    let cache = Cache {
        vm: env.get_java_vm()?,
        native: env.new_global_ref(class)?,
        decision: env.get_static_method_id(class, "decision", "(ZJJJJIJ)Ldev/rl/Decision;")?,
        composite: env.get_static_method_id(
            class,
            "composite",
            "(ZJIJ[Ljava/lang/Object;)Ldev/rl/CompositeDecision;",
        )?,
        stats: env.new_global_ref(&stats)?,
        stats_new,
        error: env.get_static_method_id(
            class,
            "error",
            "(ILjava/lang/String;JJJJ)Ljava/lang/RuntimeException;",
        )?,
        complete: env.get_static_method_id(
            class,
            "complete",
            "(Ljava/util/concurrent/CompletableFuture;Ljava/lang/Object;)V",
        )?,
        fail: env.get_static_method_id(
            class,
            "fail",
            "(Ljava/util/concurrent/CompletableFuture;Ljava/lang/Throwable;)V",
        )?,
        thread_attached: env.get_static_method_id(
            class,
            "threadAttached",
            "(Ljava/lang/String;)V",
        )?,
        object_class: env.new_global_ref(&object_class)?,
        string_class: env.new_global_ref(&string_class)?,
    };
    // A racing second init loses harmlessly: both looked up the same things.
    let _ = CACHE.set(cache);
    Ok(())
}
