import './base.css';
import './proposal.css';
