//! The JSON-RPC methods of both protocol versions as one type: the server dispatches on it,
//! the client names its calls with it, and each method knows its version and whether it
//! answers with a stream.

use std::fmt;
use std::str::FromStr;

/// An A2A protocol version: v1.0 or v0.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    V1,
    V03,
}

impl ProtocolVersion {
    /// The `A2A-Version` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V1 => "1.0",
            ProtocolVersion::V03 => "0.3",
        }
    }

    /// `1`, `1.0`, `1.0.1` → v1; `0.3`, `0.3.0` → v0.3; anything else is not spoken.
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        let mut it = s.trim().split('.');
        match (it.next(), it.next()) {
            (Some("1"), _) => Some(ProtocolVersion::V1),
            (Some("0"), Some("3")) => Some(ProtocolVersion::V03),
            _ => None,
        }
    }
}

/// A JSON-RPC method name this host serves (and its client calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    // A2A v1.0
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
    // A2A v0.3
    /// `message/send`
    MessageSend,
    /// `message/stream`
    MessageStream,
    /// `tasks/get`
    TasksGet,
    /// `tasks/cancel`
    TasksCancel,
    /// `tasks/resubscribe`
    TasksResubscribe,
    /// `tasks/pushNotificationConfig/set`
    PushConfigSet,
    /// `tasks/pushNotificationConfig/get`
    PushConfigGet,
    /// `tasks/pushNotificationConfig/list`
    PushConfigList,
    /// `tasks/pushNotificationConfig/delete`
    PushConfigDelete,
    /// `agent/getAuthenticatedExtendedCard`
    GetAuthenticatedExtendedCard,
}

/// A method name that is not one of [`Method`]'s (names are case-sensitive).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Method not found: {0}")]
pub struct UnknownMethod(pub String);

impl Method {
    /// Every method, v1.0 first.
    pub const ALL: [Method; 21] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::DeleteTaskPushNotificationConfig,
        Method::GetExtendedAgentCard,
        Method::MessageSend,
        Method::MessageStream,
        Method::TasksGet,
        Method::TasksCancel,
        Method::TasksResubscribe,
        Method::PushConfigSet,
        Method::PushConfigGet,
        Method::PushConfigList,
        Method::PushConfigDelete,
        Method::GetAuthenticatedExtendedCard,
    ];

    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::SendMessage => "SendMessage",
            Method::SendStreamingMessage => "SendStreamingMessage",
            Method::GetTask => "GetTask",
            Method::ListTasks => "ListTasks",
            Method::CancelTask => "CancelTask",
            Method::SubscribeToTask => "SubscribeToTask",
            Method::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Method::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Method::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Method::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Method::GetExtendedAgentCard => "GetExtendedAgentCard",
            Method::MessageSend => "message/send",
            Method::MessageStream => "message/stream",
            Method::TasksGet => "tasks/get",
            Method::TasksCancel => "tasks/cancel",
            Method::TasksResubscribe => "tasks/resubscribe",
            Method::PushConfigSet => "tasks/pushNotificationConfig/set",
            Method::PushConfigGet => "tasks/pushNotificationConfig/get",
            Method::PushConfigList => "tasks/pushNotificationConfig/list",
            Method::PushConfigDelete => "tasks/pushNotificationConfig/delete",
            Method::GetAuthenticatedExtendedCard => "agent/getAuthenticatedExtendedCard",
        }
    }

    /// The protocol version the method belongs to.
    pub fn version(self) -> ProtocolVersion {
        match self {
            Method::SendMessage
            | Method::SendStreamingMessage
            | Method::GetTask
            | Method::ListTasks
            | Method::CancelTask
            | Method::SubscribeToTask
            | Method::CreateTaskPushNotificationConfig
            | Method::GetTaskPushNotificationConfig
            | Method::ListTaskPushNotificationConfigs
            | Method::DeleteTaskPushNotificationConfig
            | Method::GetExtendedAgentCard => ProtocolVersion::V1,
            Method::MessageSend
            | Method::MessageStream
            | Method::TasksGet
            | Method::TasksCancel
            | Method::TasksResubscribe
            | Method::PushConfigSet
            | Method::PushConfigGet
            | Method::PushConfigList
            | Method::PushConfigDelete
            | Method::GetAuthenticatedExtendedCard => ProtocolVersion::V03,
        }
    }

    /// True when the method answers with a server-sent event stream.
    pub fn is_streaming(self) -> bool {
        matches!(
            self,
            Method::SendStreamingMessage
                | Method::SubscribeToTask
                | Method::MessageStream
                | Method::TasksResubscribe
        )
    }

    /// True for the methods that only read (a task, a list, a stream of a task already
    /// running, a push config, the extended card): the rate limit charges them less than a
    /// method that starts or changes work.
    pub fn is_read(self) -> bool {
        matches!(
            self,
            Method::GetTask
                | Method::ListTasks
                | Method::SubscribeToTask
                | Method::GetTaskPushNotificationConfig
                | Method::ListTaskPushNotificationConfigs
                | Method::GetExtendedAgentCard
                | Method::TasksGet
                | Method::TasksResubscribe
                | Method::PushConfigGet
                | Method::PushConfigList
                | Method::GetAuthenticatedExtendedCard
        )
    }

    /// True for the push-notification config methods.
    pub fn is_push_config(self) -> bool {
        matches!(
            self,
            Method::CreateTaskPushNotificationConfig
                | Method::GetTaskPushNotificationConfig
                | Method::ListTaskPushNotificationConfigs
                | Method::DeleteTaskPushNotificationConfig
                | Method::PushConfigSet
                | Method::PushConfigGet
                | Method::PushConfigList
                | Method::PushConfigDelete
        )
    }
}

impl FromStr for Method {
    type Err = UnknownMethod;

    fn from_str(s: &str) -> Result<Method, UnknownMethod> {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMethod(s.to_string()))
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_method() {
        for m in Method::ALL {
            assert_eq!(m.as_str().parse::<Method>(), Ok(m));
        }
        let names: std::collections::HashSet<_> = Method::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(names.len(), Method::ALL.len());
    }

    #[test]
    fn unknown_and_miscased_names_are_refused() {
        for s in [
            "",
            "sendMessage",
            "Message/Send",
            "tasks/list",
            "message/send ",
        ] {
            let err = s.parse::<Method>().unwrap_err();
            assert_eq!(err.to_string(), format!("Method not found: {s}"));
        }
    }

    #[test]
    fn versions_streams_and_push_methods() {
        let v1 = Method::ALL
            .iter()
            .filter(|m| m.version() == ProtocolVersion::V1);
        assert_eq!(v1.count(), 11);
        let v03 = Method::ALL
            .iter()
            .filter(|m| m.version() == ProtocolVersion::V03);
        assert_eq!(v03.count(), 10);
        for m in Method::ALL {
            // The v0.3 names are paths ("tasks/get"), the v1.0 names are not.
            assert_eq!(
                m.as_str().contains('/'),
                m.version() == ProtocolVersion::V03
            );
        }
        let streaming: Vec<_> = Method::ALL
            .into_iter()
            .filter(|m| m.is_streaming())
            .collect();
        assert_eq!(
            streaming,
            [
                Method::SendStreamingMessage,
                Method::SubscribeToTask,
                Method::MessageStream,
                Method::TasksResubscribe
            ]
        );
        assert_eq!(Method::ALL.iter().filter(|m| m.is_push_config()).count(), 8);
    }

    #[test]
    fn protocol_version_strings() {
        assert_eq!(ProtocolVersion::parse("1.0.1"), Some(ProtocolVersion::V1));
        assert_eq!(ProtocolVersion::parse("0.3"), Some(ProtocolVersion::V03));
        assert_eq!(ProtocolVersion::parse("0.2"), None);
        assert_eq!(ProtocolVersion::V03.as_str(), "0.3");
    }
}
