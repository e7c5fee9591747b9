//! The central store's host names, looked up by `getent` rather than by
//! the postgres crate, which would call getaddrinfo in this process: `prov`
//! is a static program, into which glibc's NSS would load the system's
//! modules (mdns, systemd's, sssd), where they can crash it (see
//! `prov_model::names`).

use std::net::IpAddr;

use postgres::config::Host;
use postgres::Config;

/// The configurations to try in turn for `config`: `config` itself when it
/// names no host to look up (socket directories, addresses, or `hostaddr`
/// given); else with the address of each host given as its `hostaddr`
/// (the name is still what TLS checks): for one host, one configuration
/// per address, in the name service's order (as the crate tries each
/// address of a name); for a list of hosts, each host's first address.
pub fn with_addresses(config: &Config) -> Result<Vec<Config>, String> {
    let hosts = config.get_hosts();
    let is_name = |host: &Host| matches!(host, Host::Tcp(name) if name.parse::<IpAddr>().is_err());
    if !config.get_hostaddrs().is_empty() || !hosts.iter().any(is_name) {
        return Ok(vec![config.clone()]);
    }
    let addresses_of = |name: &str| {
        let found = prov_model::names::host_addresses(name);
        if found.is_empty() {
            return Err(format!("no address found for host {name:?}"));
        }
        Ok(found)
    };
    let with = |addresses: &[IpAddr]| {
        let mut config = config.clone();
        for &address in addresses {
            config.hostaddr(address);
        }
        config
    };
    if let [Host::Tcp(name)] = hosts {
        return Ok(addresses_of(name)?.iter().map(|&address| with(&[address])).collect());
    }
    let mut firsts = Vec::with_capacity(hosts.len());
    for host in hosts {
        firsts.push(match host {
            Host::Tcp(name) => match name.parse::<IpAddr>() {
                Ok(address) => address,
                Err(_) => addresses_of(name)?[0],
            },
            Host::Unix(dir) => {
                return Err(format!(
                    "a list of hosts that mixes a socket directory ({}) with host names is not supported",
                    dir.display()
                ))
            }
        });
    }
    Ok(vec![with(&firsts)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hostaddrs(configs: &[Config]) -> Vec<Vec<IpAddr>> {
        configs.iter().map(|c| c.get_hostaddrs().to_vec()).collect()
    }

    #[test]
    fn addresses_and_sockets_are_used_as_given() {
        for url in ["host=127.0.0.1 port=5", "host=/run/postgresql", "host=db hostaddr=10.0.0.1"] {
            let config: Config = url.parse().unwrap();
            let tried = with_addresses(&config).unwrap();
            assert_eq!(tried.len(), 1, "{url}");
            assert_eq!(tried[0].get_hostaddrs(), config.get_hostaddrs(), "{url}");
        }
    }

    #[test]
    fn a_name_is_tried_at_each_of_its_addresses_and_keeps_its_name() {
        let config: Config = "host=localhost port=5 user=a".parse().unwrap();
        let tried = with_addresses(&config).unwrap();
        let expected: Vec<Vec<IpAddr>> =
            prov_model::names::host_addresses("localhost").into_iter().map(|a| vec![a]).collect();
        assert!(!expected.is_empty());
        assert_eq!(hostaddrs(&tried), expected);
        for c in &tried {
            assert_eq!(c.get_hosts(), config.get_hosts());
            assert_eq!(c.get_user(), Some("a"));
        }
    }

    #[test]
    fn an_unknown_name_is_one_line_naming_it() {
        // A name no lookup is made for (tests make no DNS query).
        let config: Config = "host=-x".parse().unwrap();
        assert_eq!(with_addresses(&config).unwrap_err(), "no address found for host \"-x\"");
    }

    #[test]
    fn a_list_of_hosts_gets_one_address_each() {
        let config: Config = "host=127.0.0.2,localhost".parse().unwrap();
        let tried = with_addresses(&config).unwrap();
        let first_of_localhost = prov_model::names::host_addresses("localhost")[0];
        assert_eq!(hostaddrs(&tried), vec![vec!["127.0.0.2".parse().unwrap(), first_of_localhost]]);
    }
}
