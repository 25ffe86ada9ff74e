//! Which connection strings a role may make the server connect with: the rules of `dblink` and
//! `postgres_fdw` for roles that are not superusers, as an allow-list.
//!
//! A connection made by a backend is made with the server's identity: its user's `~/.pgpass`
//! and service file, its client certificate and key, its Kerberos credentials, its environment
//! (`PGPASSWORD`, `PGSERVICE`, `PGSSLKEY`). A superuser may lend those, as it could read them
//! anyway. Any other role must bring its own credential and take nothing of the server's:
//! - the string holds a non-empty `password`, and the peer must ask for it
//!   ([`NON_SUPERUSER_OVERRIDES`] sets `require_auth` where libpq has it, and the glue checks
//!   `PQconnectionUsedPassword` after connecting everywhere);
//! - only the keywords in [`ALLOWED`] may appear: none names a file of the server's to read
//!   (`passfile`, `service`, `servicefile`, `sslcert`, `sslkey`, `sslrootcert` other than
//!   `system`, `sslcrl`, `sslcrldir`) or to write (`sslkeylogfile`), none selects another kind of
//!   credential (GSSAPI, OAuth, SCRAM keys) or a replication connection;
//! - the glue then overrides what libpq would otherwise take from the server's environment or
//!   home directory ([`NON_SUPERUSER_OVERRIDES`]): no client certificate, no GSSAPI encryption.
//!
//! The parsing itself is libpq's (`PQconninfoParse`): this module judges its result, so a
//! keyword spelled in a URI's query string is judged like one in `key=value` form.

use std::fmt;

/// The keywords a role that is not a superuser may use, with the values allowed where not all are.
pub const ALLOWED: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "sslmode",
    "sslnegotiation",
    "sslcompression",
    "sslsni",
    "sslrootcert",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "min_protocol_version",
    "max_protocol_version",
    "channel_binding",
    "require_auth",
    "gssencmode",
    "target_session_attrs",
    "load_balance_hosts",
    "requirepeer",
];

/// The password methods `require_auth` may name for a role that is not a superuser.
const PASSWORD_METHODS: &[&str] = &["password", "md5", "scram-sha-256"];

/// What the glue appends for a role that is not a superuser (later keywords win over the string's
/// own), with the oldest libpq version (`PQlibVersion`) that knows each keyword.
pub const NON_SUPERUSER_OVERRIDES: &[(&str, &str, i32)] = &[
    // No client certificate from the server's home directory or environment: a path that cannot
    // exist (libpq treats a missing file as no certificate), and on 16+ the explicit switch.
    ("sslcert", "/dev/null/none", 0),
    ("sslkey", "/dev/null/none", 0),
    ("sslcertmode", "disable", 160_000),
    // No GSSAPI encryption with the server's Kerberos credentials.
    ("gssencmode", "disable", 120_000),
    // The peer must ask for the password given: trust, peer, cert or GSSAPI authentication fail.
    ("require_auth", "password,md5,scram-sha-256", 160_000),
];

/// Why a role may not connect with a connection string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No non-empty `password` keyword.
    NoPassword,
    /// A keyword outside [`ALLOWED`], or a value of an allowed one that is not (`sslrootcert`
    /// other than `system`, `gssencmode` other than `disable`, `require_auth` naming anything but
    /// a password method).
    Keyword { keyword: String },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoPassword => write!(f, "a password is required"),
            Refusal::Keyword { keyword } => write!(f, "the connection option \"{keyword}\" is not allowed"),
        }
    }
}

/// Judges the options of a connection string (keyword, value; only those the string sets) for a
/// role that is not a superuser. A superuser needs no judging.
///
/// # Errors
/// The first [`Refusal`] found: an unlisted keyword before a missing password.
pub fn check_non_superuser(options: &[(String, String)]) -> Result<(), Refusal> {
    for (keyword, value) in options {
        let allowed = ALLOWED.contains(&keyword.as_str())
            && match keyword.as_str() {
                "sslrootcert" => value == "system",
                "gssencmode" => value == "disable",
                "require_auth" => !value.is_empty() && value.split(',').all(|m| PASSWORD_METHODS.contains(&m.trim())),
                _ => true,
            };
        if !allowed {
            return Err(Refusal::Keyword { keyword: keyword.clone() });
        }
    }
    if options.iter().any(|(k, v)| k == "password" && !v.is_empty()) {
        Ok(())
    } else {
        Err(Refusal::NoPassword)
    }
}

/// The overrides to append for a role that is not a superuser, with libpq `version`: every one
/// that version knows, except `require_auth` when the string sets a stricter one of its own (it
/// was judged by [`check_non_superuser`] to name only password methods).
pub fn overrides(options: &[(String, String)], version: i32) -> Vec<(&'static str, &'static str)> {
    let own_require_auth = options.iter().any(|(k, _)| k == "require_auth");
    NON_SUPERUSER_OVERRIDES
        .iter()
        .filter(|(k, _, since)| version >= *since && !(*k == "require_auth" && own_require_auth))
        .map(|(k, v, _)| (*k, *v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_password_of_its_own_is_required() {
        assert_eq!(check_non_superuser(&opts(&[("host", "db1"), ("user", "u")])), Err(Refusal::NoPassword));
        assert_eq!(check_non_superuser(&opts(&[("host", "db1"), ("password", "")])), Err(Refusal::NoPassword));
        assert_eq!(check_non_superuser(&opts(&[("host", "db1"), ("user", "u"), ("password", "p")])), Ok(()));
    }

    #[test]
    fn files_of_the_server_and_other_credentials_are_refused() {
        for keyword in [
            "passfile",
            "service",
            "servicefile",
            "sslcert",
            "sslkey",
            "sslcrl",
            "sslcrldir",
            "sslkeylogfile",
            "sslpassword",
            "sslcertmode",
            "krbsrvname",
            "gsslib",
            "gssdelegation",
            "replication",
            "oauth_issuer",
            "oauth_client_id",
            "scram_client_key",
            "scram_server_key",
            "a_keyword_of_a_future_libpq",
        ] {
            let o = opts(&[("host", "db1"), ("password", "p"), (keyword, "/etc/postgresql/x")]);
            assert_eq!(check_non_superuser(&o), Err(Refusal::Keyword { keyword: keyword.to_owned() }), "{keyword}");
        }
    }

    #[test]
    fn some_keywords_only_with_harmless_values() {
        let with = |k: &str, v: &str| check_non_superuser(&opts(&[("password", "p"), (k, v)]));
        assert_eq!(with("sslrootcert", "system"), Ok(()));
        assert!(with("sslrootcert", "/var/lib/postgresql/.postgresql/root.crt").is_err());
        assert_eq!(with("gssencmode", "disable"), Ok(()));
        assert!(with("gssencmode", "prefer").is_err());
        assert_eq!(with("require_auth", "scram-sha-256"), Ok(()));
        assert_eq!(with("require_auth", "md5, scram-sha-256"), Ok(()));
        assert!(with("require_auth", "none").is_err());
        assert!(with("require_auth", "!password").is_err());
        assert!(with("require_auth", "gss").is_err());
        assert!(with("require_auth", "").is_err());
    }

    #[test]
    fn overrides_follow_the_libpq_version_and_keep_a_stricter_require_auth() {
        let keys = |o: Vec<(&'static str, &'static str)>| o.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(overrides(&[], 150_000)), ["sslcert", "sslkey", "gssencmode"]);
        assert_eq!(keys(overrides(&[], 180_000)), ["sslcert", "sslkey", "sslcertmode", "gssencmode", "require_auth"]);
        let own = opts(&[("require_auth", "scram-sha-256")]);
        assert_eq!(keys(overrides(&own, 180_000)), ["sslcert", "sslkey", "sslcertmode", "gssencmode"]);
    }
}
