//! The cluster: nodes connected to each other, the layout applied, and which node sees
//! which up (for the tests that stop, kill and restart nodes).

use super::Garage;

impl Garage {
    /// Connects node 0 to every other node, assigns them all (zone `dc1`, 1 GB each) in the
    /// layout's first version and waits until every node reports the cluster healthy.
    pub(super) fn lay_out(&mut self) {
        for i in 1..self.nodes.len() {
            let peer = self.nodes[i].id.clone();
            self.cli(0, &["node", "connect", &peer]);
        }
        // Every node in one assignment: the layout's first version holds them all.
        let ids: Vec<String> = self.nodes.iter().map(|n| n.hex_id().to_string()).collect();
        let mut assign = vec!["layout", "assign", "-z", "dc1", "-c", "1G"];
        assign.extend(ids.iter().map(String::as_str));
        self.cli(0, &assign);
        self.cli(0, &["layout", "apply", "--version", "1"]);
        for i in 0..self.nodes.len() {
            self.wait_healthy(i);
        }
    }

    /// Waits until every running node sees node `i` down. Garage notices a dead peer only
    /// when it next sends to it (its ping comes every 15 s), so this can take that long;
    /// until then requests routed to the dead node fail over to the other replicas anyway.
    pub fn wait_seen_down(&mut self, i: usize) {
        let gone = self.nodes[i].hex_id().to_string();
        for j in self.running() {
            self.wait_for(j, &format!("node {i} seen down"), |g| {
                match g.sees(j)?.iter().find(|(id, _)| *id == gone) {
                    Some((_, true)) => Err(format!("node {j} still sees node {i} up")),
                    _ => Ok(()),
                }
            });
        }
    }

    /// The indices of the nodes whose server is running.
    fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&j| self.nodes[j].child.is_some())
            .collect()
    }

    /// Every node node `j` knows, as (hex id, up).
    fn sees(&self, j: usize) -> Result<Vec<(String, bool)>, String> {
        let out = self.try_cli(j, &["json-api", "GetClusterStatus"])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("not JSON ({e}): {out}"))?;
        let nodes = v["nodes"]
            .as_array()
            .ok_or_else(|| format!("no nodes in {out}"))?;
        Ok(nodes
            .iter()
            .map(|n| {
                let id = n["id"].as_str().unwrap_or_default().to_string();
                (id, n["isUp"] == true)
            })
            .collect())
    }

    /// Until node `i` and every other running node see each other up. Garage's peers open
    /// their own connections to a restarted node only at their next retry (seen taking 3 to
    /// 30 s), so each is asked to connect now.
    pub(super) fn wait_mesh(&mut self, i: usize) {
        let running = self.running();
        for &j in &running {
            for &k in &running {
                if (j == i) != (k == i) {
                    let _ = self.try_cli(j, &["node", "connect", &self.nodes[k].id]);
                }
            }
        }
        for &j in &running {
            let others: Vec<(usize, String)> = running
                .iter()
                .filter(|&&k| k != j && (j == i || k == i))
                .map(|&k| (k, self.nodes[k].hex_id().to_string()))
                .collect();
            self.wait_for(j, "connected again", |g| {
                let seen = g.sees(j)?;
                for (k, id) in &others {
                    if !seen.iter().any(|(s, up)| s == id && *up) {
                        return Err(format!("node {j} does not see node {k} up"));
                    }
                }
                Ok(())
            });
        }
    }

    /// Until node `i` reports the cluster `healthy`: connected to every storage node of
    /// the layout, every partition with all its nodes.
    fn wait_healthy(&mut self, i: usize) {
        self.wait_for(i, "cluster healthy (json-api GetClusterHealth)", |g| {
            let out = g.try_cli(i, &["json-api", "GetClusterHealth"])?;
            let v: serde_json::Value =
                serde_json::from_str(&out).map_err(|e| format!("not JSON ({e}): {out}"))?;
            let all = |k: &str| v[k].as_u64().is_some() && v[k] == v["partitions"];
            if v["status"] == "healthy"
                && v["storageNodesUp"].as_u64() == Some(g.nodes.len() as u64)
                && all("partitionsAllOk")
            {
                Ok(())
            } else {
                Err(out)
            }
        });
    }
}
