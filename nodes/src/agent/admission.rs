//! Admission: the agent's rules for which candidates may enter its catalog at all.

use crate::catalog::{AdmissionRule, Rejection};
use crate::deferred::TOOL_SEARCH;
use crate::tool::{ToolSource, ToolSpec};

/// The agent's admission rules, checked for every candidate before duplicates are resolved:
/// the reserved `tool_search` name (when deferral is on), host bash, and tool groups.
#[derive(Debug)]
pub(super) struct AdmissionRules {
    /// Deferral is on, so `tool_search` is the agent's own name.
    pub(super) reserve_tool_search: bool,
    /// Config tools of group `bash` are allowed.
    pub(super) host_bash: bool,
    /// The config tool groups kept (`None`: every group).
    pub(super) groups: Option<Vec<String>>,
    /// The agent was granted a store, so its memory tools may enter.
    pub(super) memory: bool,
}

impl AdmissionRules {
    /// Admit `spec`, or say which rule keeps it out and why.
    pub(super) fn admit(&self, spec: &ToolSpec) -> Result<(), Rejection> {
        let config = spec.source == ToolSource::Config;
        if self.reserve_tool_search && spec.name == TOOL_SEARCH {
            return Err(Rejection {
                by: AdmissionRule::ReservedName,
                reason: "reserved name: the agent's own tool search".to_owned(),
            });
        }
        if !self.host_bash && config && spec.group.as_deref() == Some("bash") {
            return Err(Rejection {
                by: AdmissionRule::HostBash,
                reason: "host bash is not allowed for this agent".to_owned(),
            });
        }
        if !self.memory && crate::memory::is_memory_tool(spec) {
            return Err(Rejection {
                by: AdmissionRule::MemoryGrant,
                reason: "the agent was not granted a store".to_owned(),
            });
        }
        if let Some(groups) = &self.groups {
            if config && !spec.group.as_ref().is_some_and(|g| groups.contains(g)) {
                return Err(Rejection {
                    by: AdmissionRule::ToolGroups,
                    reason: format!("group {:?} is not among {groups:?}", spec.group),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn rules(groups: Option<&[&str]>) -> AdmissionRules {
        AdmissionRules {
            reserve_tool_search: true,
            host_bash: false,
            groups: groups.map(|g| g.iter().map(|s| s.to_string()).collect()),
            memory: false,
        }
    }

    fn refused_by(rules: &AdmissionRules, spec: &ToolSpec) -> Option<AdmissionRule> {
        rules.admit(spec).err().map(|r| r.by)
    }

    #[test]
    fn reserved_name_comes_first_and_reads_as_catalog() -> TestResult {
        let spec = ToolSpec::new(TOOL_SEARCH, "d", ToolSource::Config).group("bash");
        let rejection = rules(None).admit(&spec).err().ok_or("admitted")?;
        assert_eq!(rejection.by, AdmissionRule::ReservedName);
        assert_eq!(rejection.by.to_string(), "catalog");
        assert_eq!(
            rejection.reason,
            "reserved name: the agent's own tool search"
        );
        let off = AdmissionRules {
            reserve_tool_search: false,
            ..rules(None)
        };
        assert_eq!(refused_by(&off, &spec), Some(AdmissionRule::HostBash));
        Ok(())
    }

    #[test]
    fn host_bash_and_groups_only_filter_config_tools() -> TestResult {
        let r = rules(Some(&["web"]));
        let bash = ToolSpec::new("sh", "d", ToolSource::Config).group("bash");
        assert_eq!(refused_by(&r, &bash), Some(AdmissionRule::HostBash));
        let other = ToolSpec::new("x", "d", ToolSource::Config).group("files");
        let rejection = r.admit(&other).err().ok_or("admitted")?;
        assert_eq!(rejection.by, "tool_groups");
        assert_eq!(
            rejection.reason,
            "group Some(\"files\") is not among [\"web\"]"
        );
        let web = ToolSpec::new("w", "d", ToolSource::Config).group("web");
        assert_eq!(refused_by(&r, &web), None);
        let builtin = ToolSpec::new("b", "d", ToolSource::BuiltIn).group("bash");
        assert_eq!(refused_by(&r, &builtin), None);
        Ok(())
    }
}
