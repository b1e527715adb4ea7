// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

/// @title ShieldedCredits (minimal)
/// @notice A self-contained ShieldedCredits-compatible contract for modelgate's tests and local
///         deployments: the same EIP-712 domain and SpendAuthorization type, the same account,
///         authorizeSpend, claimPayment and view functions as the published contract, without its
///         shielded-pool funding path or external libraries.
/// @dev Invariants: the spending key is fixed at first funding; nonces are strictly sequential per
///      account; a spend is claimed at most once and only by the operator it names.
interface IERC20Minimal {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
    function transfer(address to, uint256 amount) external returns (bool);
}

contract ShieldedCredits {
    bytes32 public constant SPEND_TYPEHASH = keccak256(
        "SpendAuthorization(bytes32 commitment,uint64 serviceId,uint8 jobIndex,uint256 amount,address operator,uint256 nonce,uint64 expiry)"
    );
    bytes32 public immutable DOMAIN_SEPARATOR;

    struct CreditAccount {
        address spendingKey;
        address token;
        uint256 balance;
        uint256 totalFunded;
        uint256 totalSpent;
        uint256 nonce;
    }

    struct CreditAccountView {
        address spendingKey;
        address token;
        uint256 balance;
        uint256 totalFunded;
        uint256 totalSpent;
        uint256 nonce;
    }

    struct SpendAuth {
        bytes32 commitment;
        uint64 serviceId;
        uint8 jobIndex;
        uint256 amount;
        address operator;
        uint256 nonce;
        uint64 expiry;
        bytes signature;
    }

    struct PendingSpend {
        uint256 amount;
        address token;
        address operator;
        uint64 expiry;
        bool claimed;
    }

    mapping(bytes32 => CreditAccount) internal _accounts;
    mapping(bytes32 => PendingSpend) internal _pendingSpends;

    event CreditsFunded(bytes32 indexed commitment, address indexed token, uint256 amount, uint256 newBalance);
    event CreditsSpent(bytes32 indexed commitment, bytes32 indexed authHash, uint256 amount, uint256 remainingBalance);
    event PaymentClaimed(bytes32 indexed authHash, address indexed recipient, uint256 amount);

    error InsufficientCredits(uint256 available, uint256 requested);
    error InvalidSignature();
    error SpendingKeyMismatch(address expected, address provided);
    error TokenMismatch(address expected, address provided);
    error OperatorRequired();
    error AccountNotFound(bytes32 commitment);
    error SpendExpired(uint64 expiry, uint256 currentTime);
    error InvalidNonce(uint256 expected, uint256 provided);
    error AuthNotFound(bytes32 authHash);
    error AlreadyClaimed(bytes32 authHash);
    error NotDesignatedOperator(address expected, address caller);
    error TransferFailed();

    constructor() {
        DOMAIN_SEPARATOR = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("ShieldedCredits"),
                keccak256("1"),
                block.chainid,
                address(this)
            )
        );
    }

    function fundCredits(address token, uint256 amount, bytes32 commitment, address spendingKey) external {
        if (amount == 0) revert InsufficientCredits(0, 0);
        if (spendingKey == address(0)) revert InvalidSignature();
        CreditAccount storage acct = _accounts[commitment];
        if (acct.spendingKey == address(0)) {
            acct.spendingKey = spendingKey;
            acct.token = token;
        } else {
            if (acct.spendingKey != spendingKey) revert SpendingKeyMismatch(acct.spendingKey, spendingKey);
            if (acct.token != token) revert TokenMismatch(acct.token, token);
        }
        if (!IERC20Minimal(token).transferFrom(msg.sender, address(this), amount)) revert TransferFailed();
        acct.balance += amount;
        acct.totalFunded += amount;
        emit CreditsFunded(commitment, token, amount, acct.balance);
    }

    function authorizeSpend(SpendAuth calldata auth) external returns (bytes32 authHash) {
        if (auth.operator == address(0)) revert OperatorRequired();
        CreditAccount storage acct = _accounts[auth.commitment];
        if (acct.spendingKey == address(0)) revert AccountNotFound(auth.commitment);
        if (block.timestamp > auth.expiry) revert SpendExpired(auth.expiry, block.timestamp);
        if (auth.nonce != acct.nonce) revert InvalidNonce(acct.nonce, auth.nonce);
        if (auth.amount > acct.balance) revert InsufficientCredits(acct.balance, auth.amount);

        bytes32 structHash = keccak256(
            abi.encode(
                SPEND_TYPEHASH,
                auth.commitment,
                auth.serviceId,
                auth.jobIndex,
                auth.amount,
                auth.operator,
                auth.nonce,
                auth.expiry
            )
        );
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR, structHash));
        if (_recover(digest, auth.signature) != acct.spendingKey) revert InvalidSignature();

        acct.balance -= auth.amount;
        acct.totalSpent += auth.amount;
        acct.nonce++;

        authHash = keccak256(abi.encode(auth.commitment, auth.serviceId, auth.jobIndex, auth.nonce));
        _pendingSpends[authHash] = PendingSpend({
            amount: auth.amount, token: acct.token, operator: auth.operator, expiry: auth.expiry, claimed: false
        });
        emit CreditsSpent(auth.commitment, authHash, auth.amount, acct.balance);
    }

    function claimPayment(bytes32 authHash, address recipient) external {
        PendingSpend storage spend = _pendingSpends[authHash];
        if (spend.amount == 0) revert AuthNotFound(authHash);
        if (spend.claimed) revert AlreadyClaimed(authHash);
        if (block.timestamp > spend.expiry) revert SpendExpired(spend.expiry, block.timestamp);
        if (msg.sender != spend.operator) revert NotDesignatedOperator(spend.operator, msg.sender);
        spend.claimed = true;
        if (!IERC20Minimal(spend.token).transfer(recipient, spend.amount)) revert TransferFailed();
        emit PaymentClaimed(authHash, recipient, spend.amount);
    }

    function getAccount(bytes32 commitment) external view returns (CreditAccountView memory) {
        CreditAccount storage acct = _accounts[commitment];
        return CreditAccountView(acct.spendingKey, acct.token, acct.balance, acct.totalFunded, acct.totalSpent, acct.nonce);
    }

    function getSpendAuth(bytes32 authHash)
        external
        view
        returns (uint256 amount, address token, address operator, uint64 expiry, bool claimed)
    {
        PendingSpend storage spend = _pendingSpends[authHash];
        return (spend.amount, spend.token, spend.operator, spend.expiry, spend.claimed);
    }

    /// @dev 65-byte (r, s, v) signatures only; high-s and v other than 27/28 are refused, as
    ///      OpenZeppelin's ECDSA.recover refuses them.
    function _recover(bytes32 digest, bytes calldata signature) internal pure returns (address) {
        if (signature.length != 65) revert InvalidSignature();
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0) revert InvalidSignature();
        if (v != 27 && v != 28) revert InvalidSignature();
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
        return signer;
    }
}
