//! Configuration: the environment, defaults, redaction and invalid settings.

use std::collections::HashMap;
use std::time::Duration;

use stategraph_nodes::{ModelError, OpenAiConfig, OpenAiModel};

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.get(name).cloned()
}

#[test]
fn missing_model_variable_is_a_config_error() {
    for vars in [
        &[("OPENAI_API_KEY", "sk-x")][..],
        &[("OPENAI_MODEL", "  ")][..],
    ] {
        match OpenAiConfig::from_lookup(env(vars)) {
            Err(ModelError::Config(message)) => {
                assert!(message.contains("OPENAI_MODEL"), "{message}");
                assert!(!message.contains("sk-x"));
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}

#[test]
fn environment_gives_the_default_url_and_an_optional_key() {
    let config = OpenAiConfig::from_lookup(env(&[("OPENAI_MODEL", "gpt-test")])).unwrap();
    assert_eq!(config.base_url, "https://api.openai.com/v1");
    assert_eq!(config.api_key, None);
    assert_eq!(config.model, "gpt-test");
    assert_eq!(
        config.endpoint(),
        "https://api.openai.com/v1/chat/completions"
    );

    let config = OpenAiConfig::from_lookup(env(&[
        ("OPENAI_MODEL", "llama"),
        ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
        ("OPENAI_API_KEY", "sk-local"),
        ("OPENAI_TIMEOUT_SECS", "2.5"),
    ]))
    .unwrap();
    assert_eq!(
        config.endpoint(),
        "http://localhost:11434/v1/chat/completions"
    );
    assert_eq!(config.api_key.as_deref(), Some("sk-local"));
    assert_eq!(config.timeout, Duration::from_millis(2500));
    assert!(OpenAiModel::new(config).is_ok());

    match OpenAiConfig::from_lookup(env(&[
        ("OPENAI_MODEL", "m"),
        ("OPENAI_TIMEOUT_SECS", "soon"),
    ])) {
        Err(ModelError::Config(message)) => assert!(message.contains("OPENAI_TIMEOUT_SECS")),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn debug_output_never_shows_the_api_key() {
    let config = OpenAiConfig::new("http://localhost:1/v1", "m")
        .with_api_key("sk-very-secret")
        .with_header("x-gateway-key", "gw-secret");
    let model = OpenAiModel::new(config.clone()).unwrap();
    for shown in [format!("{config:?}"), format!("{model:?}")] {
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(!shown.contains("gw-secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        assert!(shown.contains("x-gateway-key"), "{shown}");
    }
}

#[test]
fn invalid_configuration_is_a_config_error() {
    let bad = [
        OpenAiConfig::new("http://localhost:1/v1", " "),
        OpenAiConfig::new("not a url", "m"),
        OpenAiConfig::new("ftp://localhost/v1", "m"),
        OpenAiConfig::new("http://localhost:1/v1", "m").with_header("bad header", "x"),
        OpenAiConfig::new("http://localhost:1/v1", "m").with_api_key("line\nbreak"),
    ];
    for config in bad {
        let shown = format!("{config:?}");
        assert!(
            matches!(OpenAiModel::new(config), Err(ModelError::Config(_))),
            "{shown}"
        );
    }
}
