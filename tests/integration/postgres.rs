//! The PostgreSQL store behind real servers: a task run on one server is read and listed
//! from a second server on the same database.
//!
//! The database comes from `AGENT_HOST_TEST_PG` (default
//! `postgres://root@127.0.0.1:5432/test`); each test has a schema of its own, dropped at the
//! end. Unreachable: a failure under `CI=true`, a loud skip elsewhere.

use serde_json::json;

use crate::common::*;

/// A schema of its own on the test database: its URL (the schema as `search_path`).
pub struct Schema {
    pub url: String,
    name: String,
}

impl Schema {
    pub async fn new(test: &str) -> Option<Schema> {
        let base = std::env::var("AGENT_HOST_TEST_PG")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".into());
        let name = format!("it_{}_{}", &uuid().replace('-', "")[..12], test);
        let made = async {
            let (client, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            client
                .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
                .await
        };
        match tokio::time::timeout(std::time::Duration::from_secs(10), made).await {
            Ok(Ok(())) => {}
            other => {
                let why = match other {
                    Ok(Err(e)) => format!("{e:?}"),
                    _ => "no answer in 10 s".into(),
                };
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("PostgreSQL at {base} (AGENT_HOST_TEST_PG) is not reachable under CI: {why}");
                }
                eprintln!("\n!!! SKIPPED {test}: PostgreSQL at {base} is not reachable: {why}\n");
                return None;
            }
        }
        let sep = if base.contains('?') { '&' } else { '?' };
        Some(Schema {
            url: format!("{base}{sep}options=-csearch_path%3D{name}"),
            name,
        })
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection to the test database, confined to this schema.
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test database");
        tokio::spawn(conn);
        client
    }

    pub async fn drop_now(self) {
        let base = self.url.split("options=").next().unwrap_or_default();
        let base = base.trim_end_matches(['?', '&']);
        if let Ok((client, conn)) = tokio_postgres::connect(base, tokio_postgres::NoTls).await {
            tokio::spawn(conn);
            let _ = client
                .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.name))
                .await;
        }
    }
}

#[tokio::test]
async fn a_task_run_on_one_server_is_read_and_listed_on_another() {
    limit(async {
        let Some(db) = Schema::new("two_servers").await else {
            return;
        };
        let opts = || Options {
            adapter: "demo",
            postgres: Some(db.url.clone()),
            ..Options::default()
        };
        let a = TestServer::with(opts()).await;
        let b = TestServer::with(opts()).await;
        let frames = a
            .stream("SendStreamingMessage", send_params("Add a health check"))
            .await;
        let last = states(&frames);
        assert_eq!(
            last.last().map(String::as_str),
            Some("TASK_STATE_COMPLETED")
        );
        let id = frames[0].data["result"]["task"]["id"]
            .as_str()
            .or_else(|| frames[0].data["result"]["statusUpdate"]["taskId"].as_str())
            .expect("task id")
            .to_string();
        // B reads the task A ran, as A does.
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        let on_b = b.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(on_b["result"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(on_a["result"], on_b["result"]);
        // Both list the same page.
        let list_a = a.rpc("ListTasks", json!({"pageSize": 10})).await;
        let list_b = b.rpc("ListTasks", json!({"pageSize": 10})).await;
        assert_eq!(list_a["result"]["tasks"], list_b["result"]["tasks"]);
        assert_eq!(list_b["result"]["totalSize"], 1);
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}
